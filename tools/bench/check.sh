#!/usr/bin/env bash
# The fact check's speed (issue 35: at least 200 replies/s): `trellis check` over every dev
# assistant reply (the references, 6,633) with the shipped checker, one thread, output to
# /dev/null; three runs, the replies/s of each.
#
#   STORE=/tmp/odkg bash tools/bench/check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${TRELLIS_BIN:-$CARGO_TARGET_DIR/release/trellis}
STORE=${STORE:?the OpenDialKG store}
DEV=${DEV:-../shared/data/opendialkg/dialogs_dev.csv}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 tools/eval/check_inputs.py --dialogs "$DEV" --references > "$tmp/refs.jsonl"
n=$(wc -l < "$tmp/refs.jsonl")
for run in 1 2 3; do
    for mode in "" "--rewrite"; do
        start=$(date +%s.%N)
        "$B" check --store "$STORE" --checker models/check-opendialkg --input "$tmp/refs.jsonl" --json $mode > /dev/null
        end=$(date +%s.%N)
        python3 -c "print(f'run $run ${mode:-plain}: $n replies in {$end - $start:.2f} s: {$n / ($end - $start):.0f} replies/s')"
    done
done
