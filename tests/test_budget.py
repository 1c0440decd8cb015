"""The per-run limit (fixed, from this server's setting) and the pool that concurrent runs reserve from."""

import threading
import time

import pytest

import explorer
from explorer import api, budget, checks, fast_launch, reserve
from explorer.topk import topk_launch

WAIT_S = 30  # generous: the threads below hand over through events, never through timing


def test_two_runs_that_together_exceed_the_pool_do_not_run_at_once():
    pool = reserve.Budget(lambda: 100)
    first_in, release, second_waiting, second_in = (threading.Event() for _ in range(4))
    waits: list[reserve.Waiting] = []

    def first():
        with pool.reserve(60):
            first_in.set()
            release.wait(WAIT_S)

    def second():
        def on_wait(waiting):
            waits.append(waiting)
            second_waiting.set()

        with pool.reserve(60, on_wait):
            second_in.set()

    a = threading.Thread(target=first)
    a.start()
    assert first_in.wait(WAIT_S)
    b = threading.Thread(target=second)
    b.start()
    assert second_waiting.wait(WAIT_S)
    assert not second_in.is_set() and pool.held == 60
    assert pool.busy(60) == reserve.Waiting(60, 60, 100, 0.0) and pool.busy(40) is None
    assert waits[0].need == 60 and waits[0].held == 60 and waits[0].pool == 100
    assert waits[0].message().startswith("Waiting for memory:") and "this server's" in waits[0].message()
    release.set()
    assert second_in.wait(WAIT_S)
    a.join(WAIT_S)
    b.join(WAIT_S)
    assert pool.held == 0 and pool.busy(100) is None


def test_the_waiting_notice_gives_the_bytes_in_mib_and_the_seconds_waited():
    mib = 2**20
    waiting = reserve.Waiting(need=3 * mib, held=1536 * mib, pool=2048 * mib, seconds=2.4)
    assert waiting.message() == (
        "Waiting for memory: this run needs 3.0 MiB and other sessions' runs hold 1,536.0 MiB of this server's "
        "2,048.0 MiB (2 s)"
    )
    assert reserve.Waiting(mib // 2, mib, 2 * mib, 0.0).message().endswith("hold 1.0 MiB of this server's 2.0 MiB")


def test_runs_that_fit_together_do_not_wait():
    pool = reserve.Budget(lambda: 100)
    with pool.reserve(40, on_wait=lambda w: pytest.fail("waited")), pool.reserve(60) as waited:
        assert pool.held == 100 and waited >= 0
    assert pool.held == 0


def test_the_reservation_is_given_back_on_an_exception():
    pool = reserve.Budget(lambda: 100)
    with pytest.raises(ZeroDivisionError), pool.reserve(80):
        raise ZeroDivisionError
    assert pool.held == 0


def test_the_thread_s_waiting_notice_hears_reservations_made_deeper_down():
    pool = reserve.Budget(lambda: 100)
    heard = threading.Event()
    holder_in, release = threading.Event(), threading.Event()

    def holder():
        with pool.reserve(100):
            holder_in.set()
            release.wait(WAIT_S)

    t = threading.Thread(target=holder)
    t.start()
    assert holder_in.wait(WAIT_S)

    def notice(waiting):
        heard.set()
        release.set()

    with reserve.show_waits(notice), pool.reserve(50):
        assert heard.is_set()
    t.join(WAIT_S)
    assert pool.held == 0


def test_more_than_the_pool_is_refused_at_once():
    pool = reserve.Budget(lambda: 100)
    assert pool.busy(101) is None  # with nothing held there is nothing to wait for: it is refused, not queued
    with pytest.raises(explorer.TooLarge, match="this server's limit"):
        with pool.reserve(101):
            pass


def test_the_limit_is_the_setting_else_what_leaves_room_for_four_runs_and_the_kept_results(monkeypatch):
    monkeypatch.setenv(budget.SETTING, "123456789")
    assert budget.run_budget() == 123456789
    monkeypatch.delenv(budget.SETTING)
    assert budget.run_budget() == budget.DEFAULT_RUN_BUDGET
    ram = budget.machine_bytes()
    assert budget.KEPT_BUDGET == ram // 4 and budget.DEFAULT_RUN_BUDGET == (ram - ram // 4) // 4
    assert budget.RUNS_AT_ONCE * budget.DEFAULT_RUN_BUDGET + budget.KEPT_BUDGET <= ram  # together, within the RAM
    for bad in ("lots", "-5", "0", "1.5e9", "²"):  # "²" is a digit to isdigit(), not to int()
        monkeypatch.setenv(budget.SETTING, bad)
        assert budget.run_budget() == budget.DEFAULT_RUN_BUDGET
        assert any(budget.SETTING in p for p in checks.settings_problems())


def test_refusal_is_fixed_by_the_limit_and_names_a_gpu_where_one_would_fit(monkeypatch):
    need = explorer.bytes_needed(64, 4096, "float32", "emulator", explorer.VARIANTS["online_warp"])
    monkeypatch.setattr(checks.cuda, "free_bytes", lambda: pytest.fail("momentary free memory was read"))
    monkeypatch.setenv(budget.SETTING, str(need))
    explorer.check_fits(64, 4096, "float32", "emulator", explorer.VARIANTS["online_warp"])
    monkeypatch.setenv(budget.SETTING, str(need - 1))
    with pytest.raises(explorer.TooLarge, match="this server's limit") as refused:
        explorer.check_fits(64, 4096, "float32", "emulator", explorer.VARIANTS["online_warp"])
    assert "on a GPU it would need only about 2.27 MiB and fit" in str(refused.value)
    monkeypatch.setenv(budget.SETTING, str(2**20))  # not even input and output fit: no GPU advice
    with pytest.raises(explorer.TooLarge) as refused:
        explorer.check_fits(64, 4096, "float32", "emulator", explorer.VARIANTS["online_warp"])
    assert "GPU" not in str(refused.value)


def test_gpu_runs_reserve_their_device_bytes_so_two_sessions_cannot_overcommit(monkeypatch):
    """Each of two GPU runs fits the free memory alone; together they do not: the second waits for the first
    (through the same Budget as emulated runs), host memory's pool is untouched, and one over the whole GPU
    pool is refused. The pool is faked: no GPU is needed."""
    monkeypatch.setattr(reserve, "gpu_pool_bytes", lambda: 100 * 2**20)
    first_in, release, waits = threading.Event(), threading.Event(), []

    def first():
        with reserve.run_reservation("cuda", 60 * 2**20):
            first_in.set()
            release.wait(WAIT_S)

    def second():
        with (
            reserve.show_waits(lambda w: (waits.append(w), release.set())),
            reserve.run_reservation("cuda", 60 * 2**20),
        ):
            waits.append(reserve.GPU_RUNS.held)

    a = threading.Thread(target=first)
    a.start()
    assert first_in.wait(WAIT_S) and reserve.GPU_RUNS.held == 60 * 2**20 and reserve.RUNS.held == 0
    b = threading.Thread(target=second)
    b.start()
    a.join(WAIT_S)
    b.join(WAIT_S)
    assert not a.is_alive() and not b.is_alive()
    assert isinstance(waits[0], reserve.Waiting) and waits[0].held == 60 * 2**20  # it waited for the first
    assert waits[-1] == 60 * 2**20 and reserve.GPU_RUNS.held == 0  # then ran alone, and gave it back
    with pytest.raises(explorer.TooLarge, match="for all runs together"), reserve.run_reservation("cuda", 101 * 2**20):
        pass


def test_softmax_holds_its_reservation_while_it_runs(monkeypatch):
    seen = []
    run = api.emulator.run

    def spy(*args):
        seen.append(reserve.RUNS.held)
        return run(*args)

    monkeypatch.setattr(api.emulator, "run", spy)
    x = explorer.make_input("normal", rows=8, cols=256, dtype="float32", seed=0)
    explorer.softmax(x, "online_warp", backend="emulator")
    assert seen == [explorer.bytes_needed(8, 256, "float32", "emulator", explorer.VARIANTS["online_warp"])]
    assert reserve.RUNS.held == 0


@pytest.mark.gpu
def test_a_gpu_run_reserves_its_device_bytes_from_the_whole_device(monkeypatch):
    """On the GPU, a run holds its device bytes in GPU_RUNS (whose pool is the device's whole memory) and none of
    the host's RUNS, and gives them back; one larger than the device is refused before anything is allocated."""
    from explorer.backends import cuda

    assert reserve.gpu_pool_bytes() == cuda.device_info()["memory_total_bytes"]
    seen = []
    run = api.cuda.run

    def spy(*args):
        seen.append((reserve.GPU_RUNS.held, reserve.RUNS.held))
        return run(*args)

    monkeypatch.setattr(api.cuda, "run", spy)
    x = explorer.make_input("normal", rows=64, cols=4096, dtype="float32", seed=0)
    explorer.softmax(x, "fast", backend="cuda")
    assert seen == [(explorer.bytes_needed(64, 4096, "float32", "cuda", explorer.VARIANTS["fast"]), 0)]
    assert reserve.GPU_RUNS.held == 0
    with pytest.raises(explorer.TooLarge), reserve.run_reservation("cuda", reserve.gpu_pool_bytes() + 1):
        pass


def test_a_page_whose_run_must_wait_for_memory_says_so_then_runs(monkeypatch):
    """Other sessions' runs (here one thread) hold nearly all of the pool: the Outputs page's next run says that it
    waits for memory, and runs once the memory is given back."""
    pytest.importorskip("streamlit")
    from streamlit.delta_generator import DeltaGenerator
    from test_app import charts, make, ok  # the AppTest page helpers

    monkeypatch.setenv("EXPLORER_BACKEND", "emulator")
    monkeypatch.setenv(budget.SETTING, str(64 * 2**20))
    shown: list[str] = []
    info = DeltaGenerator.info

    def spy(self, body, *args, **kwargs):
        shown.append(str(body))
        return info(self, body, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "info", spy)
    at = make({"rows": "4", "cols": "100", "variants": "online_warp", "seed": "1"})
    ok(at)
    holder_in, release = threading.Event(), threading.Event()

    def holder():  # another session's run
        with reserve.RUNS.reserve(4 * 64 * 2**20 - 1024):
            holder_in.set()
            release.wait(WAIT_S)

    def page():  # this session asks for a new input: nothing of it is cached
        at.number_input(key="seed").set_value(2).run()

    other = threading.Thread(target=holder)
    other.start()
    assert holder_in.wait(WAIT_S)
    this = threading.Thread(target=page)
    this.start()
    start = time.monotonic()
    while not any(t.startswith("Waiting for memory:") for t in shown) and time.monotonic() - start < WAIT_S:
        time.sleep(0.05)
    waiting = [t for t in shown if t.startswith("Waiting for memory:")]
    assert waiting and "other sessions' runs hold" in waiting[0], shown
    assert this.is_alive()  # still waiting: nothing ran past the reservation
    release.set()
    this.join(WAIT_S)
    other.join(WAIT_S)
    assert not this.is_alive() and reserve.RUNS.held == 0
    ok(at)
    assert charts(at)


def test_device_bytes_count_the_scratch_the_cuda_backend_takes():
    """A GPU run's device bytes count the per-stream scratch its launch takes (fast_row's slices or a row's clusters
    exchanging through global memory; the top-k kernel's chunk lists, at least 1024 of 64 keys), with the backend's constants; without
    a variant, the largest over the variants. (tests/test_memory_model.py measures them on the GPU.)"""
    from explorer.backends import cuda, cuda_topk

    assert budget.TOPK_MAX_LIST == cuda_topk.TOPK_MAX_LIST
    fast = explorer.VARIANTS["fast"]
    across = fast.launch(1, 2**20, None, "float32")  # a row of clusters: their 64-bit words
    assert fast_launch.across_clusters(across)
    assert explorer.bytes_needed(1, 2**20, "float32", "cuda", fast) >= 2 * 4 * 2**20 + 2 * 8 * cuda.EXCHANGE_FLOOR
    rows, cols = 12, 300000  # fast_row's slices
    launch = fast.launch(rows, cols, None, "float32")
    assert launch.protocol == "slices" and launch.chunks > 1
    io = 2 * 4 * rows * cols
    assert explorer.bytes_needed(rows, cols, "float32", "cuda", fast) >= io + 2 * 4 * cuda.EXCHANGE_FLOOR
    assert explorer.bytes_needed(rows, cols, "float32", "cuda") == max(
        explorer.bytes_needed(rows, cols, "float32", "cuda", v) for v in explorer.VARIANTS.values()
    )
    topk = budget.topk_device_bytes(True, topk_launch(2, 33, 8, "float32"), launch, 2, 33, "float32", 8)
    assert topk >= 8 * budget.TOPK_MAX_LIST * budget.TOPK_SCRATCH_FLOOR
