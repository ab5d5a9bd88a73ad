#!/usr/bin/env bash
# Trellis's PCST solver against pcst_fast, side by side: random instances and the instances
# the `pcst` retriever builds from the real candidate graphs of the OpenDialKG and MetaQA dev
# sets (both variants), each solved with gw and strong pruning by both.
#
#   bash tools/bench/pcst.sh        # BENCH_DIR (default /tmp/trellis-bench) holds the stores
#
# pcst_fast 1.0.10's wheel answers wrongly under numpy 2, so the Python side runs in a venv
# with numpy < 2 (made here once, from PyPI).
set -euo pipefail
source "$(dirname "$0")/python_env.sh"
if [ ! -f "$work/metaqa/CURRENT" ]; then
    "$bin/trellis" ingest --store "$work/metaqa" "$data/metaqa/kb.txt" >&2
fi
real=()
for variant in seed003 g-retriever; do
    "$bin/trellis-pcst" instances --store "$work/kg" --dataset opendialkg --input "$data/opendialkg/dialogs_dev.csv" \
        --pcst-variant "$variant" --output "$work/odkg-$variant.jsonl"
    "$bin/trellis-pcst" instances --store "$work/metaqa" --dataset metaqa --input "$data/metaqa/qa_1hop_dev.json" \
        --pcst-variant "$variant" --limit 2000 --output "$work/metaqa-$variant.jsonl"
    real+=("$work/odkg-$variant.jsonl" "$work/metaqa-$variant.jsonl")
done
"$py" tools/reference/check_pcst.py --trellis-pcst "$bin/trellis-pcst" --random 250 --repeat 5 --real "${real[@]}" --json "$work/check_pcst.json"
