#!/usr/bin/env bash
# The poly-encoder experiment of issue 23 (tools/train/poly.py says what it compares): the
# shipped bi-encoder's head against a poly-encoder head trained on its frozen token vectors,
# both ranking the capped candidates of the first DEV_TURNS dev turns.
#
#   bash tools/train/poly.sh [RUN_DIR]     # default ~/.cache/trellis/train/enc-run
#
# Needs encoders.sh's run (its rows.jsonl and dev store); writes RUN/req-dev.jsonl,
# RUN/all-dev-N.jsonl (`trellis retrieve --retriever all --top 1000`) and RUN/poly/report.json.
# Knobs: DEV_TURNS (1000), TURNS (training turns, 6000), CODES (16), EPOCHS (4), LR (1e-3), THREADS (1),
# OUT (RUN/poly).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
run=${1:-$HOME/.cache/trellis/train/enc-run}
data=${TRELLIS_SHARED_DATA:-$root/../shared/data}/opendialkg
DEV_TURNS=${DEV_TURNS:-1000}
THREADS=${THREADS:-1}
[ -f "$run/rows.jsonl" ] && [ -f "$run/store-dev/.loaded" ] || { echo "poly.sh: run tools/train/encoders.sh first (no $run/rows.jsonl or dev store)" >&2; exit 2; }
PY=$(bash tools/venv.sh train)
source tools/setup.sh
cargo build --release --locked --bin trellis
bin="$CARGO_TARGET_DIR/release/trellis"
[ -f "$run/req-dev.jsonl" ] || python3 tools/data/opendialkg_requests.py "$data/dialogs_dev.csv" -o "$run/req-dev.jsonl"
head -n "$DEV_TURNS" "$run/req-dev.jsonl" >"$run/req-dev-$DEV_TURNS.jsonl"
[ -f "$run/all-dev-$DEV_TURNS.jsonl" ] || "$bin" retrieve --store "$run/store-dev" --retriever all --top 1000 --threads "$THREADS" \
    --input "$run/req-dev-$DEV_TURNS.jsonl" --output "$run/all-dev-$DEV_TURNS.jsonl" --json
"$PY" tools/train/poly.py --rows "$run/rows.jsonl" --model models/dense-opendialkg --dev-requests "$run/req-dev-$DEV_TURNS.jsonl" \
    --dev-candidates "$run/all-dev-$DEV_TURNS.jsonl" --out "${OUT:-$run/poly}" --lr "${LR:-1e-3}" --dev-turns "$DEV_TURNS" --turns "${TURNS:-6000}" \
    --codes "${CODES:-16}" --epochs "${EPOCHS:-4}" --threads "$THREADS"
