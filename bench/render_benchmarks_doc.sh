#!/usr/bin/env bash
# Regenerate the tables of docs/benchmarks.md from the committed raw results (the hand-written notes
# block is kept). Usage: bench/render_benchmarks_doc.sh [DOCS_DIR]   (default: docs)
# tests/unit/test_benchmark_doc.py checks that the committed page is exactly what this prints.
set -euo pipefail
cd "$(dirname "$0")/.."
DOCS=${1:-docs}
R=docs/benchmarks/raw
exec "${PYTHON:-python}" bench/gpu_tuning.py docs "$R"/{resnet50,encoder,mlp,convnet,attention}.json \
  --extra-aa "$R"/resnet50-call{1,3}.json --docs "$DOCS" \
  --revision "ce07cbc (resnet50, attention), 753d755 (the rest)" --date 2026-11-29 \
  --command "# call 1 at ce07cbc; calls 2-4 at 753d755, which only adds resuming a workload's run on the same machine" \
  --command "BENCH_BUDGET_S=480 python3 bench/gpu_tuning.py run --workloads resnet50,attention --gpus 0,1 --out /tmp/bench --export \$OUT" \
  --command "BENCH_BUDGET_S=480 python3 bench/gpu_tuning.py run --workloads encoder,convnet --gpus 0,1 --out /tmp/bench --export \$OUT" \
  --command "BENCH_BUDGET_S=490 python3 bench/gpu_tuning.py run --workloads resnet50,mlp --gpus 0,1 --out /tmp/bench --export \$OUT   # resnet50 resumes" \
  --command "BENCH_BUDGET_S=285 CUDA_VISIBLE_DEVICES=0 python3 bench/gpu_tuning.py run --workloads resnet50 --out /tmp/bench --export \$OUT   # resumes again" \
  --command "# then, here: the tables from the exported files (copied to docs/benchmarks/raw/)" \
  --command "bench/render_benchmarks_doc.sh" \
  --protocol-after "$R"/s41/call3/resnet50.json --protocol-after "$R"/s16/call3/encoder.json \
  --protocol-after "$R"/s16/call2/mlp.json --protocol-after "$R"/s30/call2/convnet.json \
  --protocol-after "$R"/s17/call1/attention.json \
  --overhead-paired "$R"/paired/overhead.json --overhead-paired-revision d95e14a --overhead-paired-date 2026-11-30 \
  --overhead-paired-command "python3 bench/engine_overhead.py --out \$OUT/ov --rounds 9   # block's eager row was cut by the call's time limit" \
  --overhead "$R"/overhead.json --overhead-revision "18753f2" --overhead-date 2026-11-30 \
  --overhead-command "# the 'before' backend: the Inductor backend as it was before 18753f2" \
  --overhead-command "git show 5e68d85:operator/enginewright/backends/inductor.py > bench/inductor_before.py" \
  --overhead-command "python3 bench/engine_overhead.py --out /tmp/ov --variant before=inductor_before:InductorBackend" \
  --overhead-command "cp /tmp/ov/overhead.json docs/benchmarks/raw/   # then bench/render_benchmarks_doc.sh"
