#!/usr/bin/env bash
# Replies per second of the whole chain (link, retrieve, generate) on 1 and 2 worker threads,
# in one run: `trellis eval pipeline` over the first N OpenDialKG dev turns, each worker with
# its own model sessions and one ONNX Runtime thread per call (so T workers use T cores).
#
#   BENCH_DIR=/tmp/bench N=200 bash tools/bench/pipeline.sh [RETRIEVER FLAGS...]
#
# Defaults: the shipped models (MODEL=models/gsr-opendialkg, GENERATOR=models/generator-opendialkg)
# and `--retriever gsr --model $MODEL`; the store is kg.tsv with the model's token index.
# BIN=path/to/trellis measures another build (an earlier version, side by side).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/eval/kg_gsr_store.sh
bin="${BIN:-$bin}"
generator="${GENERATOR:-models/generator-opendialkg}"
n="${N:-200}"
retriever=("$@")
[ ${#retriever[@]} -eq 0 ] && retriever=(--retriever gsr --model "$model")
echo "| workers | replies/s | link ms | retrieve ms | generate ms |"
echo "|---|---|---|---|---|"
for t in 1 2; do
    "$bin" eval pipeline --store "$store" --input "$data/opendialkg/dialogs_dev.csv" --max-turns "$n" \
        "${retriever[@]}" --generator "$generator" --threads "$t" --sessions "$t" --model-threads 1 \
        --json >"$work/bench-pipeline-$t.json"
    python3 - "$t" "$work/bench-pipeline-$t.json" <<'PY'
import json, sys
t, r = sys.argv[1], json.load(open(sys.argv[2]))
m = r["timings"]
print(f"| {t} | {r['replies_per_s']:.2f} | {m['link_ms']:.2f} | {m['retrieve_ms']:.1f} | {m['generate_ms']:.1f} |")
PY
done
