"""The __global__ functions of a CUDA source file, found by matching brackets, so attributes such as
__launch_bounds__(f(a, sizeof(T)), ...) may nest to any depth. The Kernels page shows a variant's functions from
it, and the plug-in tests check that the registry's functions exist."""

from __future__ import annotations

import re
from dataclasses import dataclass

COMMENT_OR_LITERAL = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.DOTALL)
GLOBAL = re.compile(r"\b__global__\b")
TEMPLATE = re.compile(r"\btemplate\s*<")
WORD = re.compile(r"\s*(\w+)\s*")
BODY_OR_DECLARATION_END = re.compile(r"\s*([{;])")
CLOSERS = {"(": ")", "{": "}", "<": ">"}


@dataclass(frozen=True)
class GlobalFunction:
    name: str
    text: str  # its leading // comment lines, template line, attributes, signature and body


def blank_comments_and_literals(source: str) -> str:
    """The source with comments and string or character literals turned to spaces (newlines kept), so that
    brackets in them are not counted and every offset still points at the same character of the source."""
    return COMMENT_OR_LITERAL.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), source)


def matching_bracket(code: str, opening: int) -> int:
    """The offset of the bracket that closes the one at `opening`; angle brackets skip parenthesised parts,
    so `template <int N = (A > B)>` closes at its last `>`."""
    open_char = code[opening]
    close_char = CLOSERS[open_char]
    depth, i = 0, opening
    while i < len(code):
        ch = code[i]
        if ch == "(" and open_char == "<":
            i = matching_bracket(code, i)
        elif ch == open_char:
            depth += 1
        elif ch == close_char:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unbalanced {open_char!r} at offset {opening} of the CUDA source")


def signature_name(code: str, after_global: int) -> tuple[str, int] | None:
    """The function's name and the offset of its parameter list's `(`: the first word followed by `(` that is
    not an attribute (__launch_bounds__, __cluster_dims__, __attribute__, ...); None if none follows."""
    pos = after_global
    while word := WORD.match(code, pos):
        name, pos = word.group(1), word.end()
        if not code.startswith("(", pos):
            continue  # void, a qualifier
        if name.startswith("__") and name.endswith("__"):
            pos = matching_bracket(code, pos) + 1
            continue
        return name, pos
    return None


def definition_start(source: str, code: str, template_starts: dict[int, int], global_at: int) -> int:
    """Where a definition's text begins: the start of its template clause's line (or of its own) and the //
    comment lines right above."""
    before = len(code[:global_at].rstrip()) - 1
    start = template_starts.get(before, global_at)
    start = source.rfind("\n", 0, start) + 1
    while start > 0:
        previous = source.rfind("\n", 0, start - 1) + 1
        if not source[previous:start].lstrip().startswith("//"):
            break
        start = previous
    return start


def global_functions(source: str) -> list[GlobalFunction]:
    """Every __global__ function defined in `source` (declarations without a body left out), in source order."""
    code = blank_comments_and_literals(source)
    template_starts = {matching_bracket(code, m.end() - 1): m.start() for m in TEMPLATE.finditer(code)}
    found = []
    for match in GLOBAL.finditer(code):
        signature = signature_name(code, match.end())
        if signature is None:
            continue
        name, parameters = signature
        end = BODY_OR_DECLARATION_END.match(code, matching_bracket(code, parameters) + 1)
        if end is None or end.group(1) == ";":
            continue
        body_end = matching_bracket(code, end.start(1))
        start = definition_start(source, code, template_starts, match.start())
        found.append(GlobalFunction(name, source[start : body_end + 1]))
    return found
