#!/usr/bin/env bash
# The fact check's Table 2 (issue 35; the shape of Triton's Table 2): on every dev assistant
# reply with a gold path, fact score and NEIP of the references, and of the shipped generator
# with no knowledge, with the gold path and with the best retriever's paths (surge + rerank
# over gsr and pcst), with and without the dialog rewrite (linking, retrieval and the
# generator's input), and with the generator's 5 best sequences checked (--gen-check 5).
#
#   STORE=/tmp/odkg OUT=/tmp/fact-table bash tools/eval/fact_table.sh
#
# STORE: kg.tsv + kg_train_paths.tsv, index-tokens with the gsr tokenizer. Writes one
# `trellis eval pipeline --json` report per row into OUT; tools/eval/fact_table.py prints the table.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${TRELLIS_BIN:-$CARGO_TARGET_DIR/release/trellis}
STORE=${STORE:?the OpenDialKG store}
OUT=${OUT:?where the reports go}
DEV=${DEV:-../shared/data/opendialkg/dialogs_dev.csv}
mkdir -p "$OUT"
common=(eval pipeline --store "$STORE" --input "$DEV" --actions assistant --generator models/generator-opendialkg
        --checker models/check-opendialkg --threads "${THREADS:-2}" --json)
best=(--retriever surge --surge-model models/surge-opendialkg --model models/gsr-opendialkg
      --rerank models/rerank-opendialkg --rerank-pool gsr,pcst --knowledge retrieved)
row() {
    local name=$1; shift
    if [ -s "$OUT/$name.json" ]; then echo "$name: done"; return; fi
    echo "$name: $*"
    "$B" "${common[@]}" "$@" > "$OUT/$name.json.partial"
    mv "$OUT/$name.json.partial" "$OUT/$name.json"
}
row none --retriever all --knowledge none
row none-rewrite --retriever all --knowledge none --rewrite --gen-rewrite
row gold --retriever all --knowledge gold
row gold-check5 --retriever all --knowledge gold --gen-check 5
row best "${best[@]}"
row best-rewrite "${best[@]}" --rewrite --gen-rewrite
row best-check5 "${best[@]}" --gen-check 5
row best-rewrite-check5 "${best[@]}" --rewrite --gen-rewrite --gen-check 5
