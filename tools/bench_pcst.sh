#!/usr/bin/env bash
# Trellis's PCST solver against pcst_fast, side by side: random instances and the instances
# the `pcst` retriever builds from the real candidate graphs of the OpenDialKG and MetaQA dev
# sets (both variants), each solved with gw and strong pruning by both.
#
#   bash tools/bench_pcst.sh        # BENCH_DIR (default /tmp/trellis-bench) holds the stores
#
# pcst_fast 1.0.10's wheel answers wrongly under numpy 2, so the Python side runs in a venv
# with numpy < 2 (made here once, from PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
cargo build --release --locked --bins >&2
bin="$CARGO_TARGET_DIR/release"
data="${TRELLIS_SHARED_DATA:-../shared/data}"
work="${BENCH_DIR:-/tmp/trellis-bench}"
mkdir -p "$work"
venv="$work/venv-pcst"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "numpy<2" pcst_fast==1.0.10 networkx==3.6.1 rank_bm25==0.2.2 >&2
fi
if [ ! -f "$work/kg/CURRENT" ]; then
    "$bin/trellis" ingest --store "$work/kg" --on-error skip --rejects "$work/kg-rejects.tsv" "$data/opendialkg/kg.tsv" >&2
fi
if [ ! -f "$work/metaqa/CURRENT" ]; then
    "$bin/trellis" ingest --store "$work/metaqa" "$data/metaqa/kb.txt" >&2
fi
real=()
for variant in seed003 g-retriever; do
    "$bin/trellis-pcst" instances --store "$work/kg" --dataset opendialkg --input "$data/opendialkg/dialogs_dev.csv" \
        --variant "$variant" --output "$work/odkg-$variant.jsonl"
    "$bin/trellis-pcst" instances --store "$work/metaqa" --dataset metaqa --input "$data/metaqa/qa_1hop_dev.json" \
        --variant "$variant" --limit 2000 --output "$work/metaqa-$variant.jsonl"
    real+=("$work/odkg-$variant.jsonl" "$work/metaqa-$variant.jsonl")
done
"$venv/bin/python" tools/check_pcst.py --trellis-pcst "$bin/trellis-pcst" --random 250 --repeat 5 --real "${real[@]}" --json "$work/check_pcst.json"
