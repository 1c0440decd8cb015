#!/usr/bin/env bash
# Reproduce docs/benchmarks.md's measurements on the GPU (each step one `explorer bench` run; floor a script):
#   scripts/reproduce_h200.sh [OUT_DIR [STEP ...]]     (default: docs/results, every step)
# STEP is one of: sweep odd wide story long floor topk. Peers (torch, QuACK, Liger: requirements-peers.txt) are
# used where they import; torch also gives the device time. Then, on any machine:
#   PYTHONPATH=. python scripts/bench_report.py OUT_DIR/*.json --out docs
set -euo pipefail
out=${1:-docs/results}
shift || true
steps=${*:-sweep odd wide story long floor topk}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
run() { python3 -m explorer bench "$@"; }
shapes() { python3 -c "from explorer import bench; print(' '.join(f'{r}x{c}' for r, c in bench.sweep_shapes('$1')))"; }
for step in $steps; do
  case $step in
    # the Triton-tutorial sweep: 2^27 elements, cols 128 ... 262144; fast and the peers in every dtype
    sweep) run --variants fast --sweep cols --dtypes float32 bfloat16 float16 --json "$out/sweep-fast.json" ;;
    # odd widths (no power-of-two factor), rows filling 2^27 elements
    # shellcheck disable=SC2046
    odd) run --variants fast --shapes $(shapes odd) --dtypes float32 bfloat16 --json "$out/odd-widths.json" ;;
    # the teaching kernels beside them (fp32): what each step of the story buys
    story) run --variants naive safe_thread online_thread online_warp online_block safe_block fast --no-peers \
             --shapes 65536x1024 --dtypes float32 --json "$out/story-all.json" ;;
    # the rows that need several blocks (Hopper clusters, the global exchange), every dtype
    wide) run --variants fast --shapes 4096x32768 2048x65536 1024x131072 512x262144 883x151936 \
             --dtypes float32 bfloat16 float16 --json "$out/cluster-exchange.json" ;;
    # few, very long rows
    long) run --variants fast split_row --sweep rows --dtypes float32 bfloat16 --json "$out/long-rows.json" ;;
    # what a kernel moving the long rows' data as fast does can reach: copies that hold, wait and stream
    floor) python3 -m scripts.long_row_floor float32:1x1048576 float32:4x1048576 float32:1x16777216 float32:8x4194304 \
             bfloat16:1x1048576 bfloat16:4x1048576 bfloat16:1x16777216 bfloat16:8x4194304 > "$out/long-row-floor.txt" ;;
    # softmax + top-k: fused, unfused, torch, torch_lse and the copy (the read-once floor); batch 512, 64, 1
    topk) run --topk 1 8 50 --json "$out/topk.json" ;;
    *) echo "unknown step $step (sweep odd wide story long floor topk)" >&2; exit 2 ;;
  esac
done
