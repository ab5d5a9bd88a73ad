#!/usr/bin/env bash
# Ingest throughput, peak RSS and size on disk on the shared data sets and on synthetic
# power-law graphs, side by side with Oxigraph's bulk loader on the same N-Triples file.
# Prints the ingest table of docs/benchmarks-2026-11-25.md (markdown) on stdout.
#
#   bash tools/bench/ingest.sh            # everything (50M synthetic: about 2.5 GB of disk)
#   QUICK=1 bash tools/bench/ingest.sh    # skip the 50M-fact graph
#
# Oxigraph: `cargo install oxigraph-cli --locked` (its `oxigraph` binary on PATH, or set
# OXIGRAPH=/path/to/oxigraph); rows for it are skipped when it is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/setup.sh
cargo build --release --locked --bins >&2
bin="$CARGO_TARGET_DIR/release"
data="${TRELLIS_SHARED_DATA:-../shared/data}"
work="${BENCH_DIR:-/tmp/trellis-bench}"
budget="${MEMORY_MB:-256}"
oxigraph="${OXIGRAPH:-$(command -v oxigraph || true)}"
mkdir -p "$work"

# row NAME FACTS STORE -- command...: one table row from /usr/bin/time's wall time and max
# RSS. FACTS "stored" reads the distinct facts from the Trellis store just written.
last_facts=0
row() {
    local name="$1" facts="$2" store="$3"; shift 4
    rm -rf "$store"
    /usr/bin/time -o "$work/time.txt" -f "%e %M" "$@" >"$work/out.txt" 2>"$work/err.txt" || {
        echo "failed: $*" >&2; cat "$work/err.txt" >&2; return 1; }
    read -r secs kb <"$work/time.txt"
    if [ "$facts" = stored ]; then
        facts=$("$bin/trellis" stats --store "$store" --json | sed -n 's/.*"facts": \([0-9]*\).*/\1/p')
        last_facts=$facts
    fi
    local size; size=$(du -sb "$store" | cut -f1)
    awk -v n="$name" -v f="$facts" -v s="$secs" -v kb="$kb" -v size="$size" 'BEGIN {
        printf "| %s | %d | %.2f | %.0f | %.0f | %.1f |\n", n, f, s, f / s, kb / 1024, size / f }'
}

trellis_row() { # NAME FILE [ingest args]
    local name="$1" file="$2"; shift 2
    row "Trellis: $name" stored "$work/store" -- "$bin/trellis" ingest --store "$work/store" --memory-mb "$budget" "$@" "$file"
}

echo "| load (--memory-mb $budget) | facts | seconds | facts/s | peak RSS MB | bytes/fact on disk |"
echo "|---|---|---|---|---|---|"
trellis_row "OpenDialKG kg.tsv (TSV)" "$data/opendialkg/kg.tsv" --on-error skip --rejects "$work/rejects.tsv"
trellis_row "MetaQA kb.txt (pipe)" "$data/metaqa/kb.txt"
trellis_row "FB15k-237 .nt.gz (N-Triples)" "$data/fb15k237/freebase-fb15k237.nt.gz"
trellis_row "CoDEx-M .nt.gz (N-Triples)" "$data/codex/wikidata-codex-m.nt.gz"

zcat "$data/fb15k237/freebase-fb15k237.nt.gz" >"$work/fb15k237.nt"
trellis_row "FB15k-237 unzipped .nt" "$work/fb15k237.nt"
if [ -n "$oxigraph" ]; then
    row "Oxigraph load: FB15k-237 unzipped .nt" 310116 "$work/oxi" -- "$oxigraph" load --location "$work/oxi" --file "$work/fb15k237.nt"
fi

if [ ! -s "$work/pl10m.nt" ]; then
    "$bin/trellis-gen-powerlaw" --facts 10000000 --entities 1000000 --relations 1000 --format nt >"$work/pl10m.nt"
fi
trellis_row "synthetic power-law 10M .nt" "$work/pl10m.nt"
if [ -n "$oxigraph" ]; then
    row "Oxigraph load: synthetic power-law 10M .nt" "$last_facts" "$work/oxi" -- "$oxigraph" load --location "$work/oxi" --file "$work/pl10m.nt"
fi

if [ -z "${QUICK:-}" ]; then
    if [ ! -s "$work/pl50m.tsv" ]; then
        "$bin/trellis-gen-powerlaw" --facts 50000000 --entities 5000000 --relations 1000 >"$work/pl50m.tsv"
    fi
    trellis_row "synthetic power-law 50M .tsv" "$work/pl50m.tsv"
fi
rm -rf "$work/store" "$work/oxi"
