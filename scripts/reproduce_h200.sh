#!/usr/bin/env bash
# Reproduce docs/benchmarks.md's figures in one GPU call (about 5 minutes on an H200):
#   scripts/reproduce_h200.sh [OUT_DIR]        (default: docs/results)
# then, on any machine:  PYTHONPATH=. python scripts/bench_report.py OUT_DIR/*.json --out docs
set -euo pipefail
out=${1:-docs/results}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
run() { python3 -m explorer bench "$@" 2>/dev/null; }
# the Triton-tutorial sweep: 2^27 elements, cols 128 ... 262144; fast and the peers in every dtype
run --variants fast --sweep cols --dtypes float32 float16 bfloat16 --json "$out/sweep-fast.json"
# the teaching kernels beside them at a few widths (fp32): what each step of the story buys
run --variants online_warp online_block safe_block split_row fast --no-peers \
    --shapes 262144x512 32768x4096 4096x32768 --dtypes float32 --json "$out/story-parallel.json"
run --variants naive safe_thread online_thread online_warp online_block safe_block fast --no-peers \
    --shapes 65536x1024 --dtypes float32 --json "$out/story-all.json"
# few, very long rows
run --variants fast split_row --sweep rows --dtypes float32 bfloat16 --json "$out/long-rows.json"
# softmax + top-k: fused vs unfused vs torch, vocabulary sizes, batch 512 and 1
run --topk 8 50 --json "$out/topk.json"
