#!/usr/bin/env bash
# Retrieval over the 50M-fact synthetic store: `trellis retrieve` of 1,000 requests naming
# two power-law-drawn entities each (tools/data/powerlaw_requests.py), every retriever, 2
# threads; wall time and peak RSS by /usr/bin/time. Needs the store of
# tools/bench/ingest.sh (made here if missing: about 2.5 GB of disk and a few minutes).
#
#   BENCH_DIR=/tmp/bench [RETRIEVERS="all bm25 katz pcst gsr"] [GSR_MODEL=DIR] bash tools/bench/retrieve_50m.sh
#
# gsr runs the model of GSR_MODEL (default: the committed fixture, tests/fixtures/gsr/tiny-split)
# after indexing the store's names with its tokenizer; its peak RSS is the figure to hold
# against the model's size + 300 MB.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/setup.sh
cargo build --release --locked --bins >&2
bin="$CARGO_TARGET_DIR/release"
work="${BENCH_DIR:-/tmp/trellis-bench}"
store="$work/s50"
mkdir -p "$work"
if [ ! -f "$store/CURRENT" ]; then
    [ -s "$work/pl50m.tsv" ] || "$bin/trellis-gen-powerlaw" --facts 50000000 --entities 5000000 --relations 1000 >"$work/pl50m.tsv"
    "$bin/trellis" ingest --store "$store" --memory-mb 256 "$work/pl50m.tsv" >&2
fi
python3 tools/data/powerlaw_requests.py --entities 5000000 --requests 1000 >"$work/req50.jsonl"
echo "| retriever | seconds | peak RSS MB | requests with candidates |"
echo "|---|---|---|---|"
model="${GSR_MODEL:-tests/fixtures/gsr/tiny-split}"
all_flags=()
for r in ${RETRIEVERS:-all bm25 katz pcst gsr}; do
    case $r in
        pcst) all_flags+=("--retriever pcst --pcst-variant seed003" "--retriever pcst --pcst-variant g-retriever") ;;
        gsr)
            "$bin/trellis" index-tokens --store "$store" --tokenizer "$model/tokenizer.json" --linearization dialoggsr >&2
            all_flags+=("--retriever gsr --model $model")
            ;;
        *) all_flags+=("--retriever $r") ;;
    esac
done
for flags in "${all_flags[@]}"; do
    # shellcheck disable=SC2086
    /usr/bin/time -o "$work/time.txt" -f "%e %M" "$bin/trellis" retrieve --store "$store" $flags --threads 2 \
        --input "$work/req50.jsonl" --output "$work/out50.jsonl" >/dev/null
    read -r secs kb <"$work/time.txt"
    with=$(python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if json.loads(l)["paths"]))' "$work/out50.jsonl")
    echo "| $flags | $secs | $((kb / 1024)) | $with |"
done
if [ "${VALIDATE:-0}" = 1 ]; then
    /usr/bin/time -o "$work/time.txt" -f "%e %M" "$bin/trellis" validate --store "$store" >&2
    read -r secs kb <"$work/time.txt"
    echo
    echo "validate: $secs s, peak RSS $((kb / 1024)) MB"
fi
