"""ui/background.py: work on a low-priority worker thread, its result, exception and progress handed back to the
waiting thread, and a wait that ends early ending the work at its next progress report."""

import os
import sys
import threading

import pytest

from explorer.errors import InvalidInput
from ui import background


def test_the_result_and_the_arguments_travel():
    assert background.call(lambda a, b=0: (a, b, threading.current_thread().name), 1, b=2) == (
        1,
        2,
        "explorer-background",
    )


def test_an_exception_in_the_work_is_raised_in_the_waiting_thread():
    def refuse():
        raise InvalidInput("no")

    with pytest.raises(InvalidInput, match="no"):
        background.call(refuse)


def test_progress_is_drawn_by_the_waiting_thread_and_ends_at_the_last_report():
    drawn, waiting = [], threading.get_ident()

    def work(progress):
        for done in (1, 2, 3):
            progress(done, 3)
        return "done"

    def draw(done, rows):
        assert threading.get_ident() == waiting
        drawn.append((done, rows))

    assert background.call(work, progress=draw) == "done"
    assert drawn and drawn[-1] == (3, 3)  # reports that came together are drawn once, the latest


def test_a_wait_that_ends_early_ends_the_work_at_its_next_report():
    reported, resume, ended = threading.Event(), threading.Event(), []

    def work(progress):
        progress(1, 3)
        reported.set()
        resume.wait(30)
        try:
            progress(2, 3)  # the waiting thread has gone: the work ends here
        except background.Abandoned:
            ended.append("abandoned")
            raise
        ended.append("went on")

    class Stop(Exception):
        pass

    def draw(done, rows):
        raise Stop  # as Streamlit's stop, or a deadline, raises while drawing

    with pytest.raises(Stop):
        background.call(work, progress=draw)
    reported.wait(30)
    resume.set()
    for thread in threading.enumerate():
        if thread.name == "explorer-background":
            thread.join(30)
    assert ended == ["abandoned"]


def test_without_progress_the_work_is_not_given_one():
    assert background.call(lambda **kwargs: kwargs) == {}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own nice value is Linux's")
def test_the_work_runs_below_the_waiting_threads_priority():
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    theirs = background.call(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
    assert theirs == min(mine + background.NICE, background.MAX_NICE)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine  # the caller's is unchanged
