#!/usr/bin/env bash
# Peak RSS of a load against its --memory-mb budget, and when it peaks (issue 37): a synthetic
# power-law graph (trellis-gen-powerlaw; FACTS facts over at most ENTITIES entities) loaded
# with -v, RSS sampled every half second; prints the peak (/usr/bin/time), the budget, the
# excess, the sampled RSS around the load's phases and the store folder's disk at its peak
# (sort runs beside the tables). BIN=path/to/trellis measures another
# build (side by side: run it twice in one session).
#
#   [BIN=...] [FACTS=60000000] [ENTITIES=30000000] [MEMORY_MB=1024] BENCH_DIR=/tmp/bench bash tools/bench/load_memory.sh
#
# The default graph takes 2.6 GB as TSV and about 1 GB as a store, loads in about a minute on
# 2 cores, and holds 13.9M entities: its dictionary (681 MB) is two thirds of a 1 GiB budget.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/setup.sh
cargo build --release --locked --bins >&2
bin="${BIN:-$CARGO_TARGET_DIR/release/trellis}"
work="${BENCH_DIR:-/tmp/trellis-bench}"
facts="${FACTS:-60000000}"
entities="${ENTITIES:-30000000}"
budget="${MEMORY_MB:-1024}"
mkdir -p "$work"
input="$work/pl-$facts-$entities.tsv"
[ -s "$input" ] || "$CARGO_TARGET_DIR/release/trellis-gen-powerlaw" --facts "$facts" --entities "$entities" --relations 1000 >"$input"
store="$work/load-memory-store"
rm -rf "$store"
/usr/bin/time -f "%e %M" -o "$work/load-memory.time" "$bin" -v ingest --store "$store" --memory-mb "$budget" "$input" \
    >"$work/load-memory.out" 2>"$work/load-memory.log" &
timer=$!
sleep 0.2
pid=$(pgrep -P "$timer" | head -1)
: >"$work/load-memory.rss"
disk_peak=0
tick=0
start=$(date +%s.%N)
while kill -0 "$timer" 2>/dev/null; do
    kb=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$kb" ] && echo "$(date +%s.%N) $kb" | awk -v s="$start" '{ printf "%.1f %d\n", $1 - s, $2 / 1024 }' >>"$work/load-memory.rss"
    # The store folder's disk every 2 s (du is cheap on a few hundred files, not free).
    tick=$((tick + 1))
    if [ $((tick % 4)) = 1 ]; then
        disk=$(du -sm "$store" 2>/dev/null | cut -f1 || true)
        [ -n "$disk" ] && [ "$disk" -gt "$disk_peak" ] && disk_peak=$disk
    fi
    sleep 0.5
done
wait "$timer"
read -r secs kb <"$work/load-memory.time"
tail -n 2 "$work/load-memory.out"
awk -v s="$secs" -v kb="$kb" -v b="$budget" 'BEGIN { printf "load %.1f s; peak RSS %.0f MB against --memory-mb %d: %+.0f MB\n", s, kb / 1024, b, kb / 1024 - b }'
echo "disk of the store folder (sort runs and tables) at most $disk_peak MB while loading (sampled every 2 s); the store $(du -sm "$store" | cut -f1) MB"
sed 's/\x1b\[[0-9;]*m//g' "$work/load-memory.log" | grep -E "parsed inputs|wrote (adjacency|dictionaries)" | sed 's/^.*INFO //'
echo "sampled RSS (s MB), every 4 s:"
awk 'NR % 8 == 1' "$work/load-memory.rss" | tr '\n' ';' && echo
