"""The exceptions the explorer raises on purpose; anything else is a bug."""

import re


class ExplorerError(Exception):
    """Base class: every message is meant to be shown to a user as is."""


class InvalidInput(ExplorerError, ValueError):
    """An argument or an uploaded array the explorer cannot take (the message says which and why)."""


class GPUUnavailable(ExplorerError, RuntimeError):
    """backend="cuda" was asked for, but no usable GPU (or CuPy, or NVRTC) is present."""


class TooLarge(ExplorerError, MemoryError):
    """The run would need more memory than the backend has free, or than the operator allows."""


class KernelFailed(ExplorerError, RuntimeError):
    """A CUDA launch failed or left output unwritten; the message names the variant and shape."""


class GPUContextLost(KernelFailed):
    """A fault poisoned the CUDA context: nothing more can run on the GPU until a restart."""


def shown(value: object, limit: int = 40, quoted: bool = True) -> str:
    """A value as a message quotes it (its repr, or its text), cut with its length said when long, so a
    hostile value from a file or a URL cannot flood the page."""
    try:
        text = repr(value) if quoted else str(value)
    except ValueError:  # an int past Python's 4,300 digits for text
        if not isinstance(value, int):
            raise
        text = f"a number of about {int(value.bit_length() * 0.30103) + 1:,} digits"
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


# What Markdown, GFM and Streamlit act on in a line of text: backslash, code, emphasis, links and images,
# HTML and autolinks, headings, strikethrough, math, directives (:red[...], :material/...:), entities; an
# underscore only where it can open or close emphasis (not inside a word: prec_max stays as it is).
MARKUP = re.compile(r"[\\`*\[\]<>#~$:&]|(?<![^\W_])_|_(?![^\W_])")
LEADING = re.compile(r"^([+-]|\d+[.)])")  # a list item or a thematic break where the text starts
# What is found in the text after the escapes are undone: GFM links bare addresses (http://, https://, www.,
# a@b.c), Streamlit draws :material_x: and :streamlit: as icons and writes -> as →, -- as — (and <-, <->, >=,
# <=, ~=): an invisible word joiner breaks each pattern.
BARE = re.compile(r"(?i)(?<=http)(?=s?:)|(?<=www)(?=\.)|(?<=@)|(?<=:)(?=material|streamlit)|(?<=[<>~-])(?=[->=])")
WORD_JOINER = "\u2060"


def as_text(value: object) -> str:
    """A string for st.error, st.warning, st.caption and other elements that render Markdown, shown there as
    the text it is: a name or value from a file or a URL cannot become a link, an image or markup. Runs of
    white space become one space, as the page would show them (so no line can start a block)."""
    text = BARE.sub(WORD_JOINER, " ".join(str(value).split()))
    text = MARKUP.sub(lambda m: "\\" + m.group(), text)
    return LEADING.sub(lambda m: m.group()[:-1] + "\\" + m.group()[-1], text)
