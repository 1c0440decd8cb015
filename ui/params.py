"""The URL parameter table: one row per widget key gives its default, how the URL's text is checked and
read, how the value is written back, and the options its widget offers. Pure (no Streamlit).

Every widget has an explicit key; the same name is its URL parameter, so a URL reproduces a view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from explorer.errors import shown

TEXT_LIMIT = 64  # characters kept of a free-text parameter
SHOWN_CHOICES = 17  # longer choice lists are written "first, …, last" in a warning


@dataclass(frozen=True)
class Param:
    """One URL parameter and widget key.

    kind: "int" (a whole number in [low, high], a multiple of `multiple`, one of `choices` if given),
    "word" (one of `choices`), "words" (a comma-separated list drawn from `choices`), "flag" (1 or 0)
    or "text" (free, cut to TEXT_LIMIT characters). `default` and `choices` may be functions, read when
    asked (the registries decide them). sparse: in the URL only where it differs from the default.
    """

    key: str
    kind: str
    default: Any
    choices: tuple | Callable[[], tuple] = ()
    low: int = 0
    high: int = 0
    multiple: int = 1
    sparse: bool = False
    hint: str = ""  # what a bad value is told instead of the generic words

    def default_value(self) -> Any:
        value = self.default() if callable(self.default) else self.default
        return list(value) if self.kind == "words" else value

    def options(self) -> tuple:
        return tuple(self.choices()) if callable(self.choices) else tuple(self.choices)

    def parse(self, raw: str) -> tuple[Any, str | None]:
        """(value, None), or (None, why the text cannot be used); "words" drops unknown entries with a why."""
        options = self.options()
        if self.kind == "int":
            return self._parse_int(raw, options)
        if self.kind == "word":
            return (raw, None) if raw in options else (None, self.hint or f"choose one of {', '.join(options)}")
        if self.kind == "words":
            keys = [k for k in raw.split(",") if k]
            unknown = [k for k in keys if k not in options]
            why = (
                f"unknown {shown(', '.join(unknown), quoted=False)} ignored (choose from {', '.join(options)})"
                if unknown
                else None
            )
            return list(dict.fromkeys(k for k in keys if k in options)), why
        if self.kind == "flag":
            flag = {"1": True, "true": True, "True": True, "0": False, "false": False, "False": False}.get(raw)
            return (flag, None) if flag is not None else (None, self.hint or "1 or 0 is needed")
        return raw[:TEXT_LIMIT], None

    def _parse_int(self, raw: str, options: tuple) -> tuple[int | None, str | None]:
        try:
            number = float(raw)
            value = int(number) if number.is_integer() else None  # 1.5 is refused, not read as 1
        except (TypeError, ValueError, OverflowError):
            value = None
        if options:
            if value in options:
                return value, None
            listed = (
                ", ".join(map(str, options)) if len(options) <= SHOWN_CHOICES else f"{options[0]}, …, {options[-1]}"
            )
            return None, self.hint or f"choose one of {listed}"
        if value is not None and self.low <= value <= self.high and value % self.multiple == 0:
            return value, None
        if self.multiple > 1:
            return None, f"a multiple of {self.multiple} from {self.low} to {self.high} is needed"
        return None, f"a whole number from {self.low} to {self.high} is needed"

    def write(self, value: Any) -> str | None:
        """The URL text for a value, or None where the parameter stays out of the URL."""
        if self.sparse and value == self.default_value():
            return None
        if self.kind == "words":
            return ",".join(value)
        if self.kind == "flag":
            return "1" if value else "0"
        if self.kind == "int" and isinstance(value, float) and value.is_integer():
            return str(int(value))  # a whole-number box holds a float (ui/sidebar.py)
        return None if value == "" or value is None else str(value)


class ParamTable:
    """The rows of several pages, by key."""

    def __init__(self, rows: Iterable[Param]) -> None:
        self.rows = {p.key: p for p in rows}

    def __getitem__(self, key: str) -> Param:
        return self.rows[key]

    def __contains__(self, key: object) -> bool:
        return key in self.rows

    def keys(self) -> tuple[str, ...]:
        return tuple(self.rows)

    def defaults(self) -> dict[str, Any]:
        return {key: p.default_value() for key, p in self.rows.items()}

    def options(self, key: str) -> list:
        """What the key's widget offers."""
        return list(self.rows[key].options())

    def parse(self, query: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
        """Values for the table's keys in query, and a warning for each one that could not be used."""
        values, problems = {}, []
        for key, p in self.rows.items():
            if key not in query:
                continue
            value, why = p.parse(query[key])
            if value is not None:
                values[key] = value
            if why is not None:
                problems.append(
                    f"URL parameter {key}: {why}"
                    if p.kind == "words"
                    else f"URL parameter {key}={shown(query[key])} ignored: {why}"
                )
        return values, problems

    def to_query(self, values: Mapping[str, Any]) -> dict[str, str]:
        """URL parameters for the table's keys (a missing value is its default)."""
        out = {}
        for key, p in self.rows.items():
            text = p.write(values[key] if key in values else p.default_value())
            if text is not None:
                out[key] = text
        return out
