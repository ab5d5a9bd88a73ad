#!/usr/bin/env bash
# The README's linking tables on the OpenDialKG dev dialogs: Trellis against the substring
# baseline (all path actions, and the assistant's only), then one linking option changed
# at a time. The defaults were chosen on these dev dialogs: the figures are tuned on dev.
#
#   BENCH_DIR=/tmp/bench bash tools/eval_linking.sh
set -euo pipefail
cd "$(dirname "$0")/.."
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
