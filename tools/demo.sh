#!/usr/bin/env bash
# The main job on bundled data: load the OpenDialKG sample into a local store, then ask it
# a few neighbourhood questions. Usage: bash tools/demo.sh [STORE_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
cargo build --release --locked --bin trellis
bin="$CARGO_TARGET_DIR/release/trellis"
store="${1:-demo-store}"
rm -rf "$store"
set -x
"$bin" ingest --store "$store" tests/fixtures/opendialkg-sample.tsv
"$bin" stats --store "$store"
"$bin" validate --store "$store"
"$bin" entity --store "$store" "jordan spieth"
"$bin" neighbors --store "$store" "Jordan Spieth"
"$bin" neighbors --store "$store" "Jordan Spieth" --relation "Sport played" --hops 2 --limit 8
"$bin" neighbors --store "$store" "Golf" --limit 5 --json
"$bin" link --store "$store" "Do you know anything about Jordan Spieth? I loved Happy Gilmore."
printf '%s\n' '{"id": 1, "history": ["Do you know anything about Jordan Spieth?"]}' >"$store/requests.jsonl"
"$bin" retrieve --store "$store" --retriever bm25 --top 3 --input "$store/requests.jsonl" --output "$store/answers.jsonl"
cat "$store/answers.jsonl"
# Generative retrieval, run by ONNX Runtime. The model here is the tests' tiny fixture with
# random weights: every path it writes is a real path of the store (the constraint sees to
# that), but its ranking means nothing until a trained model ships.
"$bin" doctor --model tests/fixtures/gsr/tiny-split
"$bin" index-tokens --store "$store" --tokenizer tests/fixtures/gsr/tiny-split/tokenizer.json --linearization dialoggsr
"$bin" retrieve --store "$store" --retriever gsr --model tests/fixtures/gsr/tiny-split --top 3 --input "$store/requests.jsonl" --output "$store/gsr-answers.jsonl"
cat "$store/gsr-answers.jsonl"
