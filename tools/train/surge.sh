#!/usr/bin/env bash
# Trains the subgraph model `--retriever surge` runs (issue 23; tools/train/surge.py says
# the architecture) on the OpenDialKG training dialogs and ships it:
#
#   bash tools/train/surge.sh [RUN_DIR]        # default ~/.cache/trellis/train/surge-run
#
# Steps (each skipped when its output exists, so a rerun resumes an interrupted run; the
# training goes on from its last checkpoint):
#   1. the venv (`tools/venv.sh train`) and the trellis binary;
#   2. the spec (tokenizer.json, config.json, trellis.json of INIT and INIT_TOKENIZER): what
#      `trellis targets` reads to make the model's inputs;
#   3. the training store (kg.tsv + kg_train_paths.tsv) and the dev store (kg.tsv);
#   4. `trellis targets` on the training and dev dialogs: each turn's candidate subgraph as
#      the model's inputs, its candidate paths, the gold one;
#   5. training (EPOCHS; dev path@k after each, the best kept), shipped to OUT.
#
# Knobs (environment): INIT (a saved T5, its `hf` folder: the dialog encoder), INIT_TOKENIZER,
# THREADS, SEED, EPOCHS, LR, BATCH, WIDTH, LAYERS, OUT, STOP_AFTER (checks: stop after this
# many steps, nothing shipped).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
run=${1:-$HOME/.cache/trellis/train/surge-run}
data=${TRELLIS_SHARED_DATA:-$root/../shared/data}/opendialkg
INIT=${INIT:-$HOME/.cache/trellis/train/gen-delex/generator/epoch-6/hf}
INIT_TOKENIZER=${INIT_TOKENIZER:-$HOME/.cache/trellis/train/gen-delex/gen-tokenizer.json}
THREADS=${THREADS:-1}
SEED=${SEED:-20261126}
EPOCHS=${EPOCHS:-4}
LR=${LR:-1e-3}
BATCH=${BATCH:-16}
WIDTH=${WIDTH:-128}
LAYERS=${LAYERS:-2}
OUT=${OUT:-$root/models/surge-opendialkg}
STOP_AFTER=${STOP_AFTER:-}

PY=$(bash tools/venv.sh train)
source tools/setup.sh
cargo build --release --locked --bin trellis
bin="$CARGO_TARGET_DIR/release/trellis"
mkdir -p "$run"
say() { echo "surge.sh: $*" >&2; }
source tools/train/lib.sh

copy_init "$INIT" "$INIT_TOKENIZER"
tok="$run/init/gen-tokenizer.json"
[ -f "$run/spec/trellis.json" ] || "$PY" tools/train/surge.py spec --init "$run/init/hf" --tokenizer "$tok" --out "$run/spec"
store_for store-train "$data/kg.tsv" "$data/kg_train_paths.tsv"
store_for store-dev "$data/kg.tsv"
for split in train dev; do
    if [ ! -f "$run/$split.jsonl" ]; then
        "$bin" targets --store "$run/store-$split" --model "$run/spec" --input "$data/dialogs_$split.csv" --output "$run/$split.jsonl.part" --threads "$THREADS"
        mv "$run/$split.jsonl.part" "$run/$split.jsonl"
    fi
done
"$PY" tools/train/surge.py train --run "$run" --init "$run/init/hf" --tokenizer "$tok" --targets "$run/train.jsonl" --dev-targets "$run/dev.jsonl" \
    --seed "$SEED" --threads "$THREADS" --epochs "$EPOCHS" --lr "$LR" --batch "$BATCH" --width "$WIDTH" --layers "$LAYERS" ${STOP_AFTER:+--stop-after "$STOP_AFTER"}
[ -n "$STOP_AFTER" ] || "$PY" tools/train/surge.py ship --run "$run" --out "$OUT"
say "done"
