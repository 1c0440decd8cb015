"""A page of the app as the menu, the sidebar and the URL see it: each page module ends with its PAGE, and
ui/menu.py lists them in menu order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .params import Param

EVERY_SECTION = ("input", "shape", "seed", "dtype", "accumulator", "kernels", "row")  # the sidebar's, in its order
KERNEL_SECTIONS = ("shape", "dtype", "accumulator", "kernels")  # what chooses kernels and their launches, not an input


@dataclass(frozen=True)
class Page:
    render: Callable[[], None]
    title: str
    path: str  # its URL path (the first page of the menu is also served at /)
    icon: str
    params: tuple[Param, ...] = ()  # its URL parameters, besides the sidebar's
    sidebar: tuple[str, ...] = EVERY_SECTION  # the sidebar sections it reads; the rest sit folded away
    sidebar_without_gpu: tuple[str, ...] | None = None  # ... where they differ on the emulation
    # the sidebar says what a run of the chosen shape needs, and refuses one that won't fit
    runs_the_shape: bool = False

    def sections(self, on_gpu: bool) -> tuple[str, ...]:
        return self.sidebar if on_gpu or self.sidebar_without_gpu is None else self.sidebar_without_gpu
