"""scripts/timeline_topk.py's report, on made-up stamps (the stamps themselves need a GPU)."""

import numpy as np

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
