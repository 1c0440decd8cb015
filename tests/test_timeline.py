"""scripts/timeline_topk.py's and timeline_fast.py's reports, on made-up stamps (the stamps themselves need a GPU)."""

import numpy as np

from scripts import timeline_fast
from scripts.timeline_topk import STAGES, report


def test_the_timeline_lists_block_zeros_stages_in_the_order_it_passed_them(capsys):
    launches, blocks = 3, 4
    stamps = np.zeros((launches, blocks, len(STAGES), 2), np.int64)
    chunk = [0, 1, 2, 9, 10, 3, 4, 5]  # a chunk's stages, in time order
    leader = [6, 11, 9, 10, 7, 8]  # then the leader's: its select_pool stamps overwrite the chunk's
    for launch in range(launches):
        for block in range(blocks):
            for step, stage in enumerate(chunk + (leader if block == 0 else [])):
                ns = 1000 + 100 * step + 10 * block
                stamps[launch, block, stage] = ns, 2 * ns  # a 2 GHz clock
    report(stamps)
    out = capsys.readouterr().out
    order = out.split("block 0, in order:")[1]
    positions = [order.index(f"| {stage}:") for stage in (0, 1, 2, 3, 4, 5, 6, 11, 9, 10, 7, 8)]
    assert positions == sorted(positions)
    assert "2.00 GHz" in out  # block 0's cycles over its nanoseconds, first stamp to last
    assert "+200 cyc" in order  # 100 ns between consecutive stamps


def fast_stamps(launches: int, blocks: int) -> np.ndarray:
    """Stamps as timeline_fast's build records them, every block on an SM of its own."""
    stamps = np.zeros((launches, blocks, timeline_fast.SM_SLOT + 1), np.int64)
    stamps[:, :, timeline_fast.SM_SLOT] = 1 + np.arange(blocks)
    return stamps


def test_the_fast_timeline_gives_each_stage_its_first_median_and_last_block(capsys):
    launches, blocks = 3, 5
    stamps = fast_stamps(launches, blocks)
    for block in range(blocks):
        for stage in (0, 1, 2, 5, 3, 4):  # stage 5 (inside the exchange) comes between 2 and 3
            stamps[:, block, stage] = 1000 + 100 * stage + 10 * block
    stamps[:, 0, 0] = 990  # the first start: times are from it
    timeline_fast.report(stamps)
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[-3:] for line in out.splitlines()[1:]}
    assert rows["0"] == ["0", "30", "50"]
    assert rows["5"] == ["510", "530", "550"]  # 1000 + 500 + 10·block, less 990
    assert rows["4"] == ["410", "430", "450"]


def test_the_fast_timeline_leaves_out_stages_no_block_passed(capsys):
    stamps = fast_stamps(2, 3)
    for stage in (0, 1, 2, 3, 4):  # a cluster's launch: no global exchange, no stage 5
        stamps[:, :, stage] = 1000 + 100 * stage
    timeline_fast.report(stamps)
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()[1:6]] == ["0", "1", "2", "3", "4"]
    assert out.splitlines()[6].strip() == "blocks sharing their SM with another of the launch: 0 of 3"


def test_the_fast_timeline_says_when_blocks_sharing_an_sm_had_their_slices(capsys):
    """Four blocks; in each launch two share an SM (a different pair each time) and load 300 ns after the others."""
    stamps = fast_stamps(2, 4)
    stamps[:, :, 0] = 1000
    stamps[:, :, 1] = 2000
    stamps[0, :, timeline_fast.SM_SLOT] = [1, 2, 3, 3]
    stamps[0, 2:, 1] += 300
    stamps[1, :, timeline_fast.SM_SLOT] = [7, 7, 8, 9]
    stamps[1, :2, 1] += 300
    timeline_fast.report(stamps)
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert "blocks sharing their SM with another of the launch: 2 of 4" in lines
    assert "slice loaded (median block): sharing an SM 1300 ns, alone 1000 ns" in lines


def test_the_fast_timeline_says_when_each_block_loaded_by_its_place_in_its_sms_start_order(capsys):
    """Three blocks an SM: the later a block starts on its SM, the later its slice (block order breaks start ties)."""
    stamps = fast_stamps(2, 6)
    stamps[:, :, timeline_fast.SM_SLOT] = [1, 2, 1, 2, 1, 2]
    stamps[:, :, 0] = [1000, 1000, 1020, 1000, 1010, 1000]  # SM 1: blocks 0, 4, 2; SM 2 (ties): blocks 1, 3, 5
    stamps[:, :, 1] = [2000, 2100, 2400, 2200, 2300, 2400]
    timeline_fast.report(stamps)
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    want = (
        "slice loaded, by the block's place in its SM's start order (1st, 2nd, ...; median block): 1050, 1250, 1400 ns"
    )
    assert want in lines
