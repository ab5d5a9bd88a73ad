#!/usr/bin/env bash
# An update's time against the size of its change when the change lands on one hub (issue 37):
# on the OpenDialKG store, one `trellis update --add` of K new facts that all point at one
# entity (its incoming list grows by K in one update) and, for comparison, of K facts spread
# over K entities, for K in SIZES. OLD_BIN=path/to/trellis runs another build beside this one
# on the same store copies in the same run (the peer: the build before a change). Markdown on
# stdout.
#
#   [OLD_BIN=...] [SIZES="2000 10000 50000"] BENCH_DIR=/tmp/bench bash tools/bench/update_hub.sh
#
# Takes a minute with this build alone; an old build whose update re-encodes the hub's list
# on every fact takes minutes at K=50000.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/setup.sh
cargo build --release --locked --bin trellis >&2
bin="$CARGO_TARGET_DIR/release/trellis"
work="${BENCH_DIR:-/tmp/trellis-bench}/update-hub"
sizes="${SIZES:-2000 10000 50000}"
mkdir -p "$work"
kg=../shared/data/opendialkg/kg.tsv
hub="Toni Morrison"
grep -qF "	$hub" "$kg" || { echo "$kg: no entity $hub" >&2 && exit 2; }

rm -rf "$work/base"
"$bin" ingest --store "$work/base" --on-error skip "$kg" >/dev/null

builds=("new=$bin")
[ -z "${OLD_BIN:-}" ] || builds+=("old=$OLD_BIN")

# Seconds and the update's added facts: `run BUILD INPUT`, on a fresh copy of the base store.
run() {
    local exe="$1" input="$2"
    rm -rf "$work/copy"
    cp -r "$work/base" "$work/copy"
    /usr/bin/time -f "%e %M" -o "$work/time.txt" "$exe" update --store "$work/copy" --format tsv --add "$input" --json >"$work/report.json"
    read -r secs kb <"$work/time.txt"
    added=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counts"]["facts_added"])' "$work/report.json")
    echo "$secs $((kb / 1024)) $added"
}

echo "| shape | K facts | build | seconds | peak RSS MB | facts added |"
echo "|---|---|---|---|---|---|"
for k in $sizes; do
    awk -v k="$k" -v hub="$hub" 'BEGIN { for (i = 0; i < k; i++) printf "hub-fan-%d\tfan_of\t%s\n", i, hub }' >"$work/hub-$k.tsv"
    awk -v k="$k" 'BEGIN { for (i = 0; i < k; i++) printf "spread-%d\tfan_of\tspread-target-%d\n", i, i }' >"$work/spread-$k.tsv"
    for shape in hub spread; do
        for b in "${builds[@]}"; do
            read -r secs mb added < <(run "${b#*=}" "$work/$shape-$k.tsv")
            echo "| $shape | $k | ${b%%=*} | $secs | $mb | $added |"
        done
    done
done
rm -rf "$work/copy"
