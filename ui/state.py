"""The sidebar's configuration as typed values (pure: no Streamlit): its URL parameters, the Config a run
reads, the input it names, the distributions' own parameters, and the one file-name slug.

Distribution parameters live under "p_<dist>_<name>" in the session and "p_<name>" in the URL (only
the current distribution's). The pages' parameters sit beside their pages; ui/url.py joins them all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import explorer
from explorer.checks import MAX_DIM
from explorer.errors import shown
from explorer.registry import BLOCK_SIZES, BLOCK_SIZES_TEXT

from .params import Param

UPLOAD = "upload"  # the "distribution" that means the user's own logits
UPLOAD_STEM = 40  # characters of an uploaded file's name kept in a file slug


def default_dist() -> str:
    return "normal" if "normal" in explorer.DISTRIBUTIONS else next(iter(explorer.DISTRIBUTIONS))


def default_block() -> int:
    sizes = [v.default_block_size for v in explorer.VARIANTS.values() if v.takes_block_size]
    return sizes[0] if sizes else 256


RUN_PARAMS = (
    Param("dist", "word", default_dist, choices=lambda: (*explorer.DISTRIBUTIONS, UPLOAD)),
    Param("rows", "int", 8, low=1, high=MAX_DIM),
    Param("cols", "int", 1000, low=1, high=MAX_DIM),
    Param("seed", "int", 0, low=0, high=2**32 - 1),
    Param("dtype", "word", "float32", choices=tuple(explorer.DTYPES)),
    Param("acc", "word", "float32", choices=tuple(explorer.DTYPES)),
    Param("variants", "words", lambda: tuple(explorer.VARIANTS), choices=lambda: tuple(explorer.VARIANTS)),
    Param(
        "block",
        "int",
        default_block,
        choices=BLOCK_SIZES,
        hint=f"a {BLOCK_SIZES_TEXT} is needed",
    ),
    Param("row", "int", 0, low=0, high=MAX_DIM),
)


def file_slug(*parts: object) -> str:
    """A download's file name (without extension): the parts joined by "_", × written x, and every character
    but letters, digits, "-", "_" and "." written "-"."""
    text = "_".join(str(p) for p in parts if p != "").replace("×", "x")
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def exact_text(value: float) -> str:
    """value as short as it reads back exactly: "1", "-3", "0.1", "1.23456789"."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def params_text(params: tuple[tuple[str, float], ...]) -> str:
    """A distribution's parameters in a file name: "_scale100"."""
    return "".join(f"_{name}{exact_text(value)}" for name, value in params)


def dist_text(dist: str, params: tuple[tuple[str, float], ...]) -> str:
    """A distribution by its title, as the sidebar names it, its parameters after it: "Large magnitude (scale=100)"."""
    named = ", ".join(f"{name}={exact_text(value)}" for name, value in params)
    return explorer.DISTRIBUTIONS[dist].title + (f" ({named})" if named else "")


def source_slug(dist: str, params: tuple[tuple[str, float], ...], upload_name: str = "") -> str:
    """The input's part of a download's name: the distribution and its parameters, or the upload's file stem."""
    if dist == UPLOAD:
        return f"upload-{upload_name.rsplit('.', 1)[0][:UPLOAD_STEM] or 'file'}"
    return dist + params_text(params)


@dataclass(frozen=True)
class GeneratedInput:
    """An input drawn from one of explorer.DISTRIBUTIONS."""

    dist: str
    params: tuple[tuple[str, float], ...]
    rows: int
    cols: int
    dtype: str
    seed: int

    def load(self):
        return explorer.make_input(
            self.dist, self.rows, self.cols, dtype=self.dtype, seed=self.seed, **dict(self.params)
        )


@dataclass(frozen=True)
class UploadedInput:
    """The user's logits file; its bytes travel in the value, so a cache keyed by it is keyed by the data."""

    filename: str
    data: bytes
    dtype: str

    def load(self):
        return explorer.load_logits(self.data, self.filename, self.dtype)


InputSpec = GeneratedInput | UploadedInput


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

    def input(self, upload: bytes | None) -> InputSpec | None:
        """The input this configuration names (None for an upload whose bytes are missing)."""
        if self.uploaded:
            return None if upload is None else UploadedInput(self.upload_name, upload, self.dtype)
        return GeneratedInput(self.dist, self.params, self.rows, self.cols, self.dtype, self.seed)

    def slug(self, page: str) -> str:
        """A file name for downloads, naming the configuration."""
        return file_slug(
            "softmax",
            page,
            source_slug(self.dist, self.params, self.upload_name),
            f"{self.rows}x{self.cols}",
            self.dtype,
            f"acc-{self.acc}",
            f"seed{self.seed}",
            f"row{self.row}",
        )

    def describe(self) -> str:
        """The input in a caption's words: the file, or the distribution as the sidebar names it, with its parameters
        and seed (a file has no seed)."""
        if self.uploaded:
            return f"upload {self.upload_name} · {self.shape_text()}"
        return f"{self.dist_text()} · {self.shape_text()} · seed {self.seed}"

    def dist_text(self) -> str:
        return dist_text(self.dist, self.params)

    def shape_text(self) -> str:
        """The shape, dtype and accumulator: what the Kernels page and a GPU's benchmark read of the sidebar."""
        return f"{self.rows}×{self.cols} {self.dtype} · acc {self.acc}"


# --- the distributions' parameters ---------------------------------------------------------------------


def param_key(dist: str, name: str) -> str:
    return f"p_{dist}_{name}"


def parse_dist_params(query: Mapping[str, str], dist: str) -> tuple[dict[str, float], list[str]]:
    """Session values for the URL's p_<name> parameters of distribution `dist`, and what could not be used."""
    values, problems = {}, []
    spec = explorer.DISTRIBUTIONS.get(dist)
    for name in [k for k in query if k.startswith("p_")]:
        pname, raw = name[2:], query[name]
        if spec is None or pname not in spec.params:
            problems.append(f"URL parameter {name}={shown(raw)} ignored: {dist} has no parameter {pname}")
            continue
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if math.isnan(value):  # float() reads "nan" as a number: it is not one
            problems.append(f"URL parameter {name}={shown(raw)} ignored: not a number")
            continue
        p = spec.params[pname]
        if not p.low <= value <= p.high:  # ±inf included
            problems.append(f"URL parameter {name}={shown(raw)} ignored: outside [{p.low:g}, {p.high:g}]")
            continue
        values[param_key(dist, pname)] = value
    return values, problems


def dist_params_query(values: Mapping) -> dict[str, str]:
    """The current distribution's parameters as p_<name> URL parameters."""
    spec = explorer.DISTRIBUTIONS.get(values.get("dist", default_dist()))
    if spec is None:
        return {}
    return {
        f"p_{name}": exact_text(float(values.get(param_key(spec.key, name), p.default)))
        for name, p in spec.params.items()
    }
