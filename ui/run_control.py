"""Work held to this server's time budget: refused until confirmed ("Run anyway"), shown with progress and a
Stop button where it is long, ended past DEADLINE times its budget, and logged where it ends long or stopped."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import streamlit as st
from streamlit.logger import get_logger
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException

from explorer import budget

ss = st.session_state
# Streamlit's logger: its handler and level (logger.level, INFO by default), so that an operator sees how long runs
# end in the server's output
log = get_logger("softmax_explorer.ui")
PROGRESS_SECONDS = 2.0  # emulated runs estimated longer than this show progress and a Stop button
DEADLINE = 3  # a run ends past this many times its budget (the estimate can be off on a busy machine)
STOPPED = "Stopped before the run finished. {kept} and your settings are unchanged: run again, or change a setting."
clock = time.monotonic  # tests replace it to overrun a run without waiting


def duration(seconds: float) -> str:
    if seconds < 1:
        return "under 1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


# Bounded work is named ("run": the variants of Outputs and Error; "lab_points", "lab_stagnation": the precision
# lab; "trace": the Step page): the name keys its buttons, and a stop or a "Run anyway" is kept per name, for the
# request `key` it was given for, so one page's answer leaves another's alone.


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
