"""The configuration: defaults from the registries, parsing and writing the URL (pure), and the session glue.

Every widget has an explicit key; the same name is its URL parameter, so a URL reproduces a view.
Distribution parameters live under "p_<dist>_<name>" in the session and "p_<name>" in the URL (only
the current distribution's). parse_query and to_query are pure functions, tested without Streamlit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import explorer
from explorer import precision
from explorer.topk import K_MAX, VOCABS

UPLOAD = "upload"  # the "distribution" that means the user's own logits
DTYPE_NAMES = tuple(explorer.DTYPES)
BLOCK_SIZES = tuple(range(32, 1025, 32))
MAX_DIM = 2**31 - 1

# keys of the sidebar (the run's configuration) and of the pages (what the view shows)
RUN_KEYS = ("dist", "rows", "cols", "seed", "dtype", "acc", "variants", "block", "row")
PAGE_KEYS = ("log", "tv", "lane", "step", "heat", "tree", "kv", "tshape")

# the Softmax + top-k page and the Precision lab: in the URL only where they differ from their defaults
TK_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
TOPK_DEFAULTS = {"tk_vocab": VOCABS[0], "tk_batch": 8, "tk_k": 8, "tk_row": 0, "tk_log": True, "tk_tshape": ""}
PREC_EXPONENTS = tuple(range(4, 21))  # rows of n = 2^4 .. 2^20
PREC_BLOCKS = (64, 128, 256, 512, 1024)
PREC_STEP_CAPS = tuple(2**k for k in range(8, 21))
PREC_STAG_NS = tuple(2**k for k in range(11, 21))
PREC_STAG_DISTS = ("constant", "decreasing")
PREC_QUANTITIES = ("d", "out")
PREC_CAP_EMULATOR, PREC_CAP_GPU = 2**12, 2**16  # steps per lane by default: the GPU replays faster
PRECISION_DEFAULTS = {"prec_max": 18, "prec_dtype": "float32", "prec_variants": list(precision.ONLINE_VARIANTS),
                      "prec_block": 256, "prec_cap": PREC_CAP_EMULATOR, "prec_quantity": "d",
                      "prec_variant": "online_thread", "prec_cmp_acc": "float16", "prec_cmp_dist": "decreasing",
                      "prec_stag_dist": "constant", "prec_stag_n": 2**13}
SPARSE_KEYS = tuple(TOPK_DEFAULTS) + tuple(PRECISION_DEFAULTS)
PAGE_KEYS = PAGE_KEYS + SPARSE_KEYS


def default_variants() -> list[str]:
    return list(explorer.VARIANTS)


def default_block() -> int:
    sizes = [v.default_block_size for v in explorer.VARIANTS.values() if v.takes_block_size]
    return sizes[0] if sizes else 256


def defaults() -> dict:
    return {
        "dist": "normal" if "normal" in explorer.DISTRIBUTIONS else next(iter(explorer.DISTRIBUTIONS)),
        "rows": 8,
        "cols": 1000,
        "seed": 0,
        "dtype": "float32",
        "acc": "float32",
        "variants": default_variants(),
        "block": default_block(),
        "row": 0,
        "log": True,
        "tv": "",
        "lane": 0,
        "step": 0,
        "heat": "d",
        "tree": "",
        "kv": "",
        "tshape": "",
        **TOPK_DEFAULTS,
        **PRECISION_DEFAULTS,
        "prec_variants": list(PRECISION_DEFAULTS["prec_variants"]),
    }


def param_key(dist: str, name: str) -> str:
    return f"p_{dist}_{name}"


@dataclass(frozen=True)
class Config:
    """What a run needs, read from the session once per rerun."""

    dist: str
    params: tuple[tuple[str, float], ...]
    rows: int
    cols: int
    seed: int
    dtype: str
    acc: str
    variants: tuple[str, ...]
    block: int
    row: int
    upload_name: str = ""

    @property
    def uploaded(self) -> bool:
        return self.dist == UPLOAD

    def block_for(self, variant: str) -> int | None:
        return self.block if explorer.VARIANTS[variant].takes_block_size else None

    def slug(self, page: str) -> str:
        """A file name for downloads, naming the configuration."""
        src = "upload-" + _safe(self.upload_name.rsplit(".", 1)[0]) if self.uploaded else self.dist
        params = "".join(f"_{k}{v:g}" for k, v in self.params)
        return (f"softmax_{page}_{src}{params}_{self.rows}x{self.cols}_{self.dtype}_acc-{self.acc}"
                f"_seed{self.seed}_row{self.row}")

    def describe(self) -> str:
        src = f"upload {self.upload_name}" if self.uploaded else self.dist + "".join(
            f" {k}={v:g}" for k, v in self.params)
        return f"{src} · {self.rows}×{self.cols} {self.dtype} · acc {self.acc} · seed {self.seed}"


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in text)[:40] or "file"


def _one(value) -> str:
    """st.query_params gives str; AppTest may give a list for repeated keys: take the last."""
    if isinstance(value, (list, tuple)):
        return str(value[-1]) if value else ""
    return str(value)


def _int(raw: str, low: int, high: int) -> int | None:
    try:
        value = int(float(raw))
    except (TypeError, ValueError, OverflowError):
        return None
    return value if low <= value <= high else None


def parse_query(query: Mapping) -> tuple[dict, list[str]]:
    """Session values from URL parameters, and a warning for each one that could not be used."""
    values: dict = {}
    problems: list[str] = []
    q = {k: _one(v) for k, v in query.items()}

    def bad(name: str, why: str) -> None:
        problems.append(f"URL parameter {name}={q[name]!r} ignored: {why}")

    if "dist" in q:
        if q["dist"] in explorer.DISTRIBUTIONS or q["dist"] == UPLOAD:
            values["dist"] = q["dist"]
        else:
            bad("dist", f"choose one of {', '.join(explorer.DISTRIBUTIONS)}, {UPLOAD}")
    dist = values.get("dist", defaults()["dist"])
    spec = explorer.DISTRIBUTIONS.get(dist)
    for name in [k for k in q if k.startswith("p_")]:
        pname = name[2:]
        if spec is None or pname not in spec.params:
            bad(name, f"{dist} has no parameter {pname}")
            continue
        try:
            value = float(q[name])
        except ValueError:
            bad(name, "not a number")
            continue
        p = spec.params[pname]
        if not (math.isfinite(value) and p.low <= value <= p.high):
            bad(name, f"outside [{p.low:g}, {p.high:g}]")
            continue
        values[param_key(dist, pname)] = value
    _take_whole_numbers(q, values, bad, (("rows", 1, MAX_DIM), ("cols", 1, MAX_DIM), ("seed", 0, 2**32 - 1),
                                         ("row", 0, MAX_DIM), ("lane", 0, 1023), ("step", 0, MAX_DIM)))
    _take_words(q, values, bad, {"dtype": DTYPE_NAMES, "acc": DTYPE_NAMES})
    if "variants" in q:
        keys = [k for k in q["variants"].split(",") if k]
        unknown = [k for k in keys if k not in explorer.VARIANTS]
        if unknown:
            problems.append(f"URL parameter variants: unknown {', '.join(unknown)} ignored")
        values["variants"] = [k for k in keys if k in explorer.VARIANTS]
    if "block" in q:
        value = _int(q["block"], 32, 1024)
        if value is None or value % 32:
            bad("block", "a multiple of 32 from 32 to 1024 is needed")
        else:
            values["block"] = value
    if "log" in q:
        values["log"] = q["log"] not in ("0", "false", "False", "")
    _take_words(q, values, bad, {"heat": HEAT_CHOICES})
    for name in ("tv", "kv"):
        if name in q:
            if q[name] in explorer.VARIANTS:
                values[name] = q[name]
            else:
                bad(name, "unknown variant")
    for name in ("tree", "tshape", "tk_tshape"):
        if name in q:
            values[name] = q[name][:64]
    _parse_pages(q, values, bad, problems)
    return values, problems


def _take_whole_numbers(q: dict, values: dict, bad, ranges) -> None:
    """values[name] = int(q[name]) for each (name, low, high) given, if it lies in [low, high]."""
    for name, low, high in ranges:
        if name in q:
            value = _int(q[name], low, high)
            if value is None:
                bad(name, f"a whole number from {low} to {high} is needed")
            else:
                values[name] = value


def _take_words(q: dict, values: dict, bad, choices: Mapping) -> None:
    """values[name] = q[name] for each name given whose value is one of choices[name]."""
    for name, options in choices.items():
        if name in q:
            if q[name] in options:
                values[name] = q[name]
            else:
                bad(name, f"choose one of {', '.join(options)}")


def _flag(raw: str) -> bool | None:
    return {"1": True, "true": True, "True": True, "0": False, "false": False, "False": False}.get(raw)


def _parse_pages(q: dict, values: dict, bad, problems: list[str]) -> None:
    """The top-k page's and the precision lab's keys: each checked against what its widget offers."""
    choices = {"tk_vocab": VOCABS, "tk_batch": TK_BATCHES, "prec_max": PREC_EXPONENTS, "prec_block": PREC_BLOCKS,
               "prec_cap": PREC_STEP_CAPS, "prec_stag_n": PREC_STAG_NS}
    for name, options in choices.items():
        if name in q:
            value = _int(q[name], min(options), max(options))
            if value is None or value not in options:
                shown = ", ".join(map(str, options)) if len(options) <= 17 else f"{options[0]}, …, {options[-1]}"
                bad(name, f"choose one of {shown}")
            else:
                values[name] = value
    _take_whole_numbers(q, values, bad, (("tk_k", 1, K_MAX), ("tk_row", 0, MAX_DIM)))
    if "tk_log" in q:
        flag = _flag(q["tk_log"])
        if flag is None:
            bad("tk_log", "1 (log scale) or 0 (linear) is needed")
        else:
            values["tk_log"] = flag
    words = {"prec_dtype": DTYPE_NAMES, "prec_quantity": PREC_QUANTITIES, "prec_variant": precision.ONLINE_VARIANTS,
             "prec_cmp_acc": precision.ACCUMULATORS, "prec_cmp_dist": tuple(precision.INPUT_CLASSES),
             "prec_stag_dist": PREC_STAG_DISTS}
    _take_words(q, values, bad, words)
    if "prec_variants" in q:
        keys = [k for k in q["prec_variants"].split(",") if k]
        unknown = [k for k in keys if k not in precision.ONLINE_VARIANTS]
        if unknown:
            problems.append(f"URL parameter prec_variants: unknown {', '.join(unknown)} ignored (choose from "
                            f"{', '.join(precision.ONLINE_VARIANTS)})")
        values["prec_variants"] = list(dict.fromkeys(k for k in keys if k in precision.ONLINE_VARIANTS))


HEAT_CHOICES = {"d": "kernel's d (log10)", "m": "kernel's m", "err": "relative error of d (log10)"}


def to_query(values: Mapping) -> dict[str, str]:
    """URL parameters for session values: every key of RUN_KEYS and PAGE_KEYS (those of the top-k page and the
    precision lab only where they differ from their defaults), and the current distribution's params."""
    d = defaults()
    out: dict[str, str] = {}
    for key in RUN_KEYS + PAGE_KEYS:
        value = values.get(key, d[key])
        if key in SPARSE_KEYS and value == d[key]:
            continue
        if key in ("variants", "prec_variants"):
            out[key] = ",".join(value)
        elif key in ("log", "tk_log"):
            out[key] = "1" if value else "0"
        elif value == "" or value is None:
            continue
        else:
            out[key] = str(value)
    spec = explorer.DISTRIBUTIONS.get(values.get("dist", d["dist"]))
    if spec is not None:
        for name, p in spec.params.items():
            out[f"p_{name}"] = f"{float(values.get(param_key(spec.key, name), p.default)):g}"
    return out
