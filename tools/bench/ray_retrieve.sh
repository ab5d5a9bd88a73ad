#!/usr/bin/env bash
# Batch retrieval from the command line, from Python and on Ray Data (1 and 2 actors) in one
# run on the same OpenDialKG dev turns over the full kg.tsv store (tools/bench/ray_retrieve.py:
# turns/s, each actor's peak RSS, answers checked equal to the command line's).
#
#   bash tools/bench/ray_retrieve.sh [TURNS] [RETRIEVER]   # default 500 gsr; the store is kept
#                                                          # in BENCH_DIR (tools/eval/kg_gsr_store.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
turns=${1:-500}
kind=${2:-gsr}
source tools/eval/kg_gsr_store.sh
PY=$(bash tools/venv.sh ray)
PATH="$(dirname "$PY"):$PATH" VIRTUAL_ENV=$(dirname "$(dirname "$PY")") "$(dirname "$PY")/maturin" develop --release --locked --quiet -m python/Cargo.toml >&2
"$PY" tools/data/opendialkg_requests.py "$data/opendialkg/dialogs_dev.csv" -o "$work/dev-requests.jsonl"
models=()
[ "$kind" = gsr ] && models=(--model "$model")
"$PY" tools/bench/ray_retrieve.py --bin "$bin" --store "$store" --requests "$work/dev-requests.jsonl" --retriever "$kind" "${models[@]}" --turns "$turns"
