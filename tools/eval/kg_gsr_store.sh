# Sourced by tools/eval/gsr.sh, pipeline.sh, encoders.sh, batch_independence.sh and
# tools/bench/rerank.sh, pipeline.sh, padding.sh, quantize.sh, freebase_scale.sh: builds the
# trellis binary and the store every retriever is measured
# on ($work/kg-gsr: OpenDialKG's kg.tsv, loaded once per BENCH_DIR) with the token index of
# $model's tokenizer. Sets bin, data, work, model and store.
# BIN: a frozen copy of a build, for runs that outlast the working tree's next build.
source tools/setup.sh
if [ -n "${BIN:-}" ]; then
    bin="$BIN"
else
    cargo build --release --locked --bin trellis >&2
    bin="$CARGO_TARGET_DIR/release/trellis"
fi
data="${TRELLIS_SHARED_DATA:-../shared/data}"
work="${BENCH_DIR:-/tmp/trellis-bench}"
model="${MODEL:-models/gsr-opendialkg}"
mkdir -p "$work"
store="$work/kg-gsr"
if [ ! -f "$store/.ingested" ]; then
    rm -rf "$store"
    "$bin" ingest --store "$store" --on-error skip --rejects "$work/kg-gsr-rejects.tsv" "$data/opendialkg/kg.tsv" >&2
    touch "$store/.ingested"
fi
# The token index follows the model's tokenizer (re-indexing an indexed store replaces it).
"$bin" index-tokens --store "$store" --tokenizer "$model/tokenizer.json" --linearization trellis >&2
