"""Helpers the pages share: the error guard, the backend badge, charts and downloads, running variants, work held
to this server's time budget (refused until confirmed, progress, Stop), widget values kept in range."""

from __future__ import annotations

import contextlib
import datetime
import functools
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import pandas as pd
import streamlit as st
from streamlit.logger import get_logger
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException

import explorer
from explorer import budget
from explorer.errors import as_text
from explorer.inputs import MAX_UPLOAD_BYTES

from . import compute, figures
from .compute import VariantRun
from .state import Config, InputSpec

ss = st.session_state
# Streamlit's logger: its handler and level (logger.level, INFO by default), so that an operator sees how long runs
# end in the server's output
log = get_logger("softmax_explorer.ui")
# The uploaders' own limit, in Streamlit's MB: 10^6 bytes in its browser code (2^20 on Windows), 2^20 at the server
# (server.maxUploadSize in .streamlit/config.toml, which must be at least this). The least whole number of MB over
# MAX_UPLOAD_BYTES either way, so that a file just over our limit reaches our check and is refused in our words.
UPLOAD_MB = MAX_UPLOAD_BYTES // 10**6 + 1
PROGRESS_SECONDS = 2.0  # emulated runs estimated longer than this show progress and a Stop button
DEADLINE = 3  # a run ends past this many times its budget (the estimate can be off on a busy machine)
STOPPED = "Stopped before the run finished. {kept} and your settings are unchanged: run again, or change a setting."
clock = time.monotonic  # tests replace it to overrun a run without waiting


def guarded(page):
    """Words, never a traceback: ExplorerError messages as they are, anything else as a short note; both shown as
    text (a message may quote a file's name or a value from it, which must not become markup)."""

    @functools.wraps(page)
    def run(*args, **kwargs) -> None:
        try:
            page(*args, **kwargs)
        except explorer.ExplorerError as exc:
            st.error(as_text(exc))
        except Exception as exc:  # st.stop / st.rerun are BaseExceptions and pass through
            log.exception("page %s failed", page.__name__)
            st.error(
                as_text(
                    f"This view hit an unexpected problem ({type(exc).__name__}: {str(exc)[:200]}). "
                    "Your settings are kept; change one, or reload the page."
                )
            )

    return run


def backend_badge(container=st) -> None:
    info = compute.backend_info()
    if info.get("backend") == "cuda":
        container.badge(
            f"GPU: {info.get('gpu', '?')} · CUDA {info.get('cuda_runtime', '?')}",
            icon=":material/memory:",
            color="green",
        )
    else:
        container.badge(
            "CPU emulation — no GPU timings",
            icon=":material/computer:",
            color="orange",
            help=f"No GPU here: {info.get('reason', 'unknown reason')}. Outputs, traces and errors come "
            "from a NumPy emulation that follows each kernel's order of operations.",
        )


def stamp() -> str:
    return figures.stamp_text(compute.backend_info(), datetime.date.today().isoformat())


def header(title: str, cfg: Config | None) -> None:
    st.title(title)
    left, right = st.columns([3, 2], vertical_alignment="center")
    if cfg is not None:
        left.caption(cfg.describe())
    with right:
        backend_badge()


def chart(fig, filename: str, key: str) -> None:
    """A plotly figure whose PNG download is named `filename`."""
    st.plotly_chart(fig, config=figures.chart_config(filename), key=key, width="stretch", theme=None)


def csv_download(
    df: pd.DataFrame, name: str, key: str, label: str = "Download table (CSV)", index: bool = True
) -> None:
    """A download of df as `name`.csv (index: with df's index as the first column)."""
    st.download_button(
        label,
        df.to_csv(index=index).encode(),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=key,
        icon=":material/download:",
        on_click="ignore",
    )


def number_columns(formats: Mapping[str, str | tuple[str, str | None]]) -> dict[str, dict]:
    """Table settings for number columns from {column: printf format} or {column: (label, format)}: how a page's
    table shows them, and the share image's formats (ui/share.py reads them back)."""
    out = {}
    for column, spec in formats.items():
        label, fmt = spec if isinstance(spec, tuple) else (None, spec)
        out[column] = st.column_config.NumberColumn(label, format=fmt)
    return out


def run_key(cfg: Config, spec: InputSpec) -> tuple:
    """What the variants' runs depend on: a stop or a "Run anyway" holds for it (not for the row shown)."""
    return spec, cfg.acc, cfg.variants, cfg.block


def estimate(cfg: Config) -> dict[str, float]:
    """Seconds each variant's emulated run should take (explorer.budget.emulation_seconds); none on a GPU, and
    none for a variant that refuses the dtype or accumulator (it fails at once)."""
    if compute.backend() == "cuda":
        return {}
    return {
        k: budget.emulation_seconds(v, cfg.rows, cfg.cols, cfg.dtype, cfg.acc, cfg.block_for(k))
        for k in cfg.variants
        if (v := explorer.VARIANTS[k]).takes(cfg.dtype, cfg.acc)
    }


def duration(seconds: float) -> str:
    if seconds < 1:
        return "under 1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


# Bounded work is named ("run": the variants of Outputs and Error; "lab_points", "lab_stagnation": the precision
# lab; "trace": the Step page): the name keys its buttons, and a stop or a "Run anyway" is kept per name, for the request `key` it
# was given for, so one page's answer leaves another's alone.


def _stop(name: str, key: tuple, message: str) -> None:
    ss["_stopped"] = {**ss.get("_stopped", {}), name: (key, message)}


def _confirm(name: str, key: tuple) -> None:
    ss["_confirmed"] = {**ss.get("_confirmed", {}), name: key}


def _again(name: str) -> None:
    ss["_stopped"] = {k: v for k, v in ss.get("_stopped", {}).items() if k != name}


def confirmed(name: str, key: tuple) -> bool:
    return ss.get("_confirmed", {}).get(name) == key


def stopped_notice(name: str, key: tuple) -> bool:
    """Say so where the work `name` of `key` was stopped, with a button to run it again. A stop holds for the
    request it stopped: another one of that name forgets it."""
    stopped = ss.get("_stopped", {}).get(name)
    if stopped is None:
        return False
    if stopped[0] != key:
        _again(name)
        return False
    st.warning(stopped[1], icon=":material/stop_circle:")
    st.button("Run again", key=f"{name}_again", on_click=_again, args=(name,), icon=":material/replay:")
    return True


def held_back(name: str, key: tuple, total: float, what: str, advice: str) -> bool:
    """Where `total` estimated seconds pass this server's time budget and `key` is not confirmed: say so (what:
    the work and how long it would take; advice: what to change, and what running it anyway means) with a
    "Run anyway" button, and return True. The answer depends on the request alone, so it is the same twice."""
    limit = budget.time_budget()
    if total <= limit or confirmed(name, key):
        return False
    st.warning(
        f"Not run yet: {what}, over this server's budget of {duration(limit)} for one request. {advice}",
        icon=":material/timer:",
    )
    st.button(
        f"Run anyway (about {duration(total)})",
        key=f"{name}_anyway",
        on_click=_confirm,
        args=(name, key),
        icon=":material/play_arrow:",
    )
    return True


class Overrun(Exception):
    """A run past DEADLINE times its budget."""


class Progress:
    """The progress area of a long run: a bar over every part's estimated share (a variant, a point), rows done
    within the one running, time so far and left, and a Stop button. Each update is where Streamlit ends the
    script of a session that clicked Stop or closed; past the deadline an update raises Overrun."""

    def __init__(self, name: str, key: tuple, seconds: dict[str, float], deadline: float, stopped: str):
        self.seconds, self.total, self.deadline = seconds, sum(seconds.values()) or 1.0, deadline
        self.start = clock()
        self.finished = 0.0  # estimated seconds of the parts done, cached ones included
        self.worked = self.running = 0.0  # estimated seconds of the runs made here: done, and the one running
        self.slot = st.empty()
        with self.slot.container():
            self.bar = st.progress(0.0, text="Starting…")
            st.button(
                "Stop", key=f"{name}_stop", on_click=_stop, args=(name, key, stopped), icon=":material/stop_circle:"
            )

    def begin(self, part: str, index: int, count: int) -> Callable[[int, int], None]:
        """Show the part starting; returns its run's progress callback."""
        share, label = self.seconds.get(part, 0.0), f"{part} ({index + 1} of {count})"
        self._draw(self.finished, label)

        def progress(done: int, rows: int) -> None:
            self.running = share * done / rows
            self._draw(self.finished + self.running, f"{label}, rows {done:,} of {rows:,}")

        return progress

    def end(self, part: str) -> None:
        self.finished += self.seconds.get(part, 0.0)
        self.worked, self.running = self.worked + self.running, 0.0

    def share(self) -> float:
        """The estimated share of the work done so far."""
        return min((self.finished + self.running) / self.total, 1.0)

    def _draw(self, done: float, label: str) -> None:
        elapsed = clock() - self.start
        if elapsed > self.deadline:
            raise Overrun(elapsed)
        measured = self.worked + self.running
        rate = elapsed / measured if measured else 1.0  # seconds taken per estimated second, once runs were made
        left = rate * max(self.total - done, 0.0)
        after = f"about {duration(left)} left" if left >= 1 else "nearly done"
        self.bar.progress(min(done / self.total, 1.0), text=f"Running {label} · {duration(elapsed)} so far, {after}")

    def close(self) -> None:
        self.slot.empty()


@contextlib.contextmanager
def bounded(name: str, key: tuple, seconds: dict[str, float], kept: str, smaller: str) -> Iterator[Progress | None]:
    """The block runs the parts estimated in `seconds` under a Progress (where they are long enough to show one),
    ended past DEADLINE times the budget (or the confirmed estimate): then the stop is kept for stopped_notice,
    which the caller asks after the block. kept: what a stop keeps ("The variants that finished are kept");
    smaller: what to change instead ("choose a smaller shape"). The end of a long run, and any stop, is logged with
    the reason."""
    total = sum(seconds.values())
    deadline = DEADLINE * max(budget.time_budget(), total if confirmed(name, key) else 0.0)
    shown = Progress(name, key, seconds, deadline, STOPPED.format(kept=kept)) if total > PROGRESS_SECONDS else None
    start, ended, why = time.monotonic(), "failed", ""  # the wall clock, not `clock` (which the deadline reads)
    try:
        yield shown
        ended = "finished"
    except StopException:  # Streamlit's stop at the next update: the session closed, or the server is stopping
        ended, why = "stopped", ": its session closed, or the server is stopping"
        raise
    except RerunException:
        ended, why = "stopped", ": its session reran (Stop, or a changed setting)"
        raise
    except Overrun as exc:
        ended, why = "stopped", f": past {DEADLINE}× its time budget"
        _stop(
            name,
            key,
            f"Stopped after {duration(exc.args[0])}: this run passed {DEADLINE}× its time budget of "
            f"{duration(deadline / DEADLINE)} (the machine is slower or busier than the estimate assumed). "
            f"{kept} and your settings are unchanged: run again, or {smaller}.",
        )
    finally:
        if shown or ended != "finished":  # every long run's end, and any run's stop
            done = f", {shown.share():.0%} done" if shown else ""
            log.info(
                "%s (estimated %s) %s after %s%s%s",
                name,
                duration(total),
                ended,
                duration(time.monotonic() - start),
                done,
                why,
            )
        if shown:
            shown.close()


def run_all(cfg: Config, spec: InputSpec) -> tuple[dict[str, VariantRun], dict[str, str]] | None:
    """Every selected variant over the input: (results by variant, error messages by variant). None, after saying
    why, where the run is stopped, or estimated over this server's time budget and not confirmed."""
    key = run_key(cfg, spec)
    if stopped_notice("run", key):
        return None
    seconds = estimate(cfg)
    total = sum(seconds.values())
    if held_back(
        "run",
        key,
        total,
        f"{len(cfg.variants)} variant(s) on {cfg.rows:,}×{cfg.cols:,} {cfg.dtype} would take about "
        f"{duration(total)} in the CPU emulation (estimated from the shape and variants)",
        "Make rows or cols smaller or select fewer variants, or run it anyway: it shows its progress and can be "
        "stopped.",
    ):
        return None
    gpu = compute.backend_info().get("backend") == "cuda"
    note = " (a dtype's first GPU run compiles its kernels: a few seconds)" if gpu else ""
    results, failed = {}, {}
    kept, smaller = "The variants that finished are kept", "choose a smaller shape or fewer variants"
    with (
        bounded("run", key, seconds, kept, smaller) as shown,
        st.spinner(f"Running {len(cfg.variants)} variant(s) on {cfg.rows}×{cfg.cols} {cfg.dtype}{note}…"),
    ):
        compute.get_input(spec)
        for i, k in enumerate(cfg.variants):
            progress = shown.begin(k, i, len(cfg.variants)) if shown else None
            try:
                results[k] = compute.run_variant(spec, k, cfg.acc, cfg.block_for(k), progress)
            except explorer.ExplorerError as exc:
                failed[k] = str(exc)
            if shown:
                shown.end(k)
    return None if stopped_notice("run", key) else (results, failed)


def show_failures(failed: dict[str, str]) -> None:
    for key, message in failed.items():
        st.warning(f"**{key}**: {as_text(message)}", icon=":material/warning:")


def config_and_spec() -> tuple[Config, InputSpec] | tuple[None, None]:
    """The sidebar's configuration and input spec, or Nones after telling the user why nothing runs."""
    cfg = ss.get("_cfg")
    if cfg is None:
        return None, None
    problem = ss.get("_fit_problem")
    if problem:
        st.error(problem, icon=":material/block:")
        return None, None
    if cfg.uploaded and ss.get("_upload_bytes") is None:
        st.info(
            "Upload a .npy or .csv file of logits in the sidebar (or pick a distribution).", icon=":material/upload:"
        )
        return None, None
    if not cfg.variants:
        st.info("Select at least one variant in the sidebar.", icon=":material/checklist:")
        return None, None
    return cfg, cfg.input(ss.get("_upload_bytes"))


@dataclass(frozen=True)
class Ran:
    """What run_page hands a page: the configuration, its input, the variants' runs and failures."""

    cfg: Config
    spec: InputSpec
    results: dict[str, VariantRun]
    failed: dict[str, str]


def run_page(title: str) -> Ran | None:
    """The start of a page over the chosen variants' results: its header, every variant run (failures
    shown); None when there is nothing to show."""
    cfg, spec = config_and_spec()
    header(title, cfg)
    if cfg is None:
        return None
    ran = run_all(cfg, spec)
    if ran is None:
        return None
    results, failed = ran
    show_failures(failed)
    return Ran(cfg, spec, results, failed) if results else None


def ensure_choice(key: str, options: list, default=None) -> None:
    """The widget's value is one of its options: the default (or the first option) otherwise."""
    if ss.get(key) not in options:
        ss[key] = default if default in options else options[0]


def clamp(key: str, low: int, high: int) -> None:
    """The widget's value is a whole number in [low, high]."""
    try:
        ss[key] = min(max(int(ss.get(key, low)), low), high)
    except (TypeError, ValueError):
        ss[key] = low
