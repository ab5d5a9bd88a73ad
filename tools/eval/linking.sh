#!/usr/bin/env bash
# The linking tables of docs/results-2026-11-25.md on the OpenDialKG dev dialogs: Trellis
# against the substring baseline (all path actions, and the assistant's only), then one linking
# option changed at a time. The defaults were chosen on these dev dialogs: the figures are tuned
# on dev.
#
#   BENCH_DIR=/tmp/bench bash tools/eval/linking.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/setup.sh
cargo build --release --locked --bins >&2
bin="$CARGO_TARGET_DIR/release"
data="${TRELLIS_SHARED_DATA:-../shared/data}"
work="${BENCH_DIR:-/tmp/trellis-bench}"
dev="$data/opendialkg/dialogs_dev.csv"
mkdir -p "$work"
[ -f "$work/kg/CURRENT" ] || "$bin/trellis" ingest --store "$work/kg" --on-error skip --rejects "$work/kg-rejects.tsv" "$data/opendialkg/kg.tsv" >&2

row() { # title, json file, which scores
    python3 - "$1" "$2" "$3" <<'PY'
import json, sys
title, r, which = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
s = r[which]
print(f"| {title} | {s['recall_named']:.4f} | {s['recall_all']:.4f} | {s['mean_entities_per_turn']:.2f} | {r['turns_named']} / {r['turns']} |")
PY
}

echo "| linker | recall, named | recall, all | entities per turn | turns named / all |"
echo "|---|---|---|---|---|"
for actions in all assistant; do
    "$bin/trellis" eval linking --store "$work/kg" --input "$dev" --actions "$actions" --json >"$work/link.json"
    row "Trellis (window 8), $actions actions" "$work/link.json" trellis
    row "case-insensitive substring, $actions actions" "$work/link.json" substring
done
echo
echo "| setting (all actions) | recall, named | recall, all | entities per turn | turns named / all |"
echo "|---|---|---|---|---|"
for setting in "--window 1" "--window 3" "--window 8" "--window 100" "--max-entities 1" "--max-entities 5" \
    "--min-word-chars 2" "--min-word-chars 4"; do
    # shellcheck disable=SC2086
    "$bin/trellis" eval linking --store "$work/kg" --input "$dev" --no-substring $setting --json >"$work/link.json"
    row "\`$setting\`" "$work/link.json" trellis
done
echo
# Where the misses are lost: of the turns whose start entity is not named in the history,
# those whose last message holds the last word of a several-word gold name (a surname, or
# the tail of a title) without the whole name.
"$bin/trellis" eval linking --store "$work/kg" --input "$dev" --no-substring --misses "$work/misses.jsonl" --json >/dev/null
python3 - "$work/misses.jsonl" <<'PY'
import json, re, sys
unnamed = surname = 0
for line in open(sys.argv[1], encoding="utf-8"):
    m = json.loads(line)
    if m["named"]:
        continue
    unnamed += 1
    words = m["gold"].lower().split()
    said = set(re.findall(r"\w+", m["last_message"].lower()))
    if len(words) > 1 and len(words[-1]) >= 3 and words[-1] in said and m["gold"].lower() not in m["last_message"].lower():
        surname += 1
print(f"missed turns whose start entity is not named in the history: {unnamed}")
print("(turns whose start entity is not named: turns - turns_named of the tables above)")
print(f"  of them, the last message holds the last word of a several-word gold name: {surname}")
PY
