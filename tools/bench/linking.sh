#!/usr/bin/env bash
# Linking latency per message and resident memory, on the shared OpenDialKG graph and on the
# 50M-fact synthetic store, against the resident memory of an empty `trellis` process.
#
#   bash tools/bench/linking.sh [SYNTHETIC_STORE]   # default /tmp/trellis-bench/s50 (made if missing)
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/setup.sh
cargo build --release --locked --bins >&2
bin="$CARGO_TARGET_DIR/release"
data="${TRELLIS_SHARED_DATA:-../shared/data}"
work="${BENCH_DIR:-/tmp/trellis-bench}"
synthetic="${1:-$work/s50}"
mkdir -p "$work"
if [ ! -f "$work/kg/CURRENT" ]; then
    "$bin/trellis" ingest --store "$work/kg" --on-error skip --rejects "$work/kg-rejects.tsv" "$data/opendialkg/kg.tsv" >&2
fi
if [ ! -f "$synthetic/CURRENT" ]; then
    [ -s "$work/pl50m.tsv" ] || "$bin/trellis-gen-powerlaw" --facts 50000000 --entities 5000000 --relations 1000 >"$work/pl50m.tsv"
    "$bin/trellis" ingest --store "$synthetic" --memory-mb 256 "$work/pl50m.tsv" >&2
fi
/usr/bin/time -o "$work/time.txt" -f "%M" "$bin/trellis" --version >/dev/null
empty=$(cat "$work/time.txt")
echo "| store | messages linked | p50 per message | p99 per message | peak RSS | above the empty process ($((empty / 1024)) MB) |"
echo "|---|---|---|---|---|---|"
for store in "$work/kg" "$synthetic"; do
    /usr/bin/time -o "$work/time.txt" -f "%M" "$bin/trellis" eval linking --store "$store" \
        --input "$data/opendialkg/dialogs_dev.csv" --no-substring --json >"$work/link.json"
    kb=$(cat "$work/time.txt")
    python3 - "$store" "$kb" "$empty" "$work/link.json" <<'PY'
import json, sys
store, kb, empty, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
r = json.load(open(path))
print(f"| {store} | {r['messages']} | {r['latency_us_p50']:.0f} µs | {r['latency_us_p99']:.0f} µs | {kb / 1024:.0f} MB | {(kb - empty) / 1024:.0f} MB |")
PY
done
