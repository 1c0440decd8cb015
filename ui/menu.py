"""The app's pages in menu order (each module's PAGE): app.py draws the menu from it, the sidebar shows the
sections each reads, and ui/url.py joins their URL parameters. A new page is a module ending in a PAGE, and its
line here."""

from __future__ import annotations

from .page import Page
from .pages import errors, kernels, outputs, precision, step, timing, topk

PAGES: tuple[Page, ...] = (outputs.PAGE, step.PAGE, errors.PAGE, precision.PAGE, topk.PAGE, timing.PAGE, kernels.PAGE)
