"""How the profiler's records of one device-time measurement fall into batches (run on a GPU machine): per
profiling session of BATCHES batches of copies, the records seen, the longest idle gaps between them (the
batches - 1 sleeps, then any stall inside a batch) and whether explorer.devicetime.split_batches tells the
batches apart.

    PYTHONPATH=. python scripts/device_time_gaps.py [--sessions 5] [--calls 20]
"""

import argparse
import itertools

import numpy as np

from explorer import devicetime
from explorer.backends import cuda


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20, help="copies of 64 MiB a batch")
    args = parser.parse_args()
    cp, prof = cuda.cp, devicetime.profiler()
    if prof is None:
        raise SystemExit("needs torch with a GPU (torch.profiler)")
    x = cp.zeros(2**24, np.float32)
    y = cp.empty_like(x)

    def copy(_: int) -> None:
        y.data.copy_from_device_async(x.data, x.nbytes)

    def sync() -> None:
        cp.cuda.get_current_stream().synchronize()

    for session in range(args.sessions):
        events = devicetime.profiled_events(prof, copy, 1, args.calls, sync, devicetime.BATCHES)
        if events is None:
            raise SystemExit("torch.profiler refused to profile (CUPTI permission?)")
        records = devicetime.counted_records(events, devicetime.COPY)
        gaps = sorted(
            (float(b["ts"]) - float(a["ts"]) - float(a["dur"]) for a, b in itertools.pairwise(records)), reverse=True
        )
        groups = devicetime.split_batches(events, devicetime.BATCHES, devicetime.COPY)
        print(
            f"session {session}: {len(records)} records, longest gaps (µs) {[round(g) for g in gaps[:6]]}, "
            f"batches {[len(g) for g in groups] if groups else 'not told apart'}"
        )


if __name__ == "__main__":
    main()
