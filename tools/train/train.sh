#!/usr/bin/env bash
# Trains the generative retriever on OpenDialKG from nothing, in one command, and exports it:
#
#   bash tools/train/train.sh [RUN_DIR]            # default ~/.cache/trellis/train/run
#
# Steps (each skipped when its output exists, so a rerun resumes an interrupted run):
#   1. the Python venv (tools/gsr/venv.sh) and the trellis binary;
#   2. the tokenizer (tools/train/tokenizer.py);
#   3. two stores: the training KG (kg.tsv + kg_train_paths.tsv) for the training targets, the
#      dev KG (kg.tsv, the store every baseline is measured on) for dev scores; token indexes
#      built with the new tokenizer;
#   4. `trellis targets` on the training dialogs: encoder inputs, gold paths as token ids and
#      the constraint's allowed sets, exactly as the decoder sees them;
#   5. stage 1, knowledge-graph reconstruction (RECON_STEPS batches);
#   6. stage 2, retrieval training (EPOCHS), dev path@k by Trellis after each epoch;
#   7. the best epoch exported (int8 weights, QUANTIZE=0 for float) to OUT.
#
# Knobs (environment): SHAPE (small-cpu | base-gpu), RECON_STEPS, EPOCHS, BATCH, LR,
# CONSTRAINED_WEIGHT, SCOPE (uncapped | capped: the allowed sets trained on), DEV_TURNS (dev
# turns scored between epochs; 0 = all), THREADS, SEED, OUT. CUDA is used when torch sees a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
run=${1:-$HOME/.cache/trellis/train/run}
data=${TRELLIS_SHARED_DATA:-$root/../shared/data}/opendialkg
SHAPE=${SHAPE:-small-cpu}
RECON_STEPS=${RECON_STEPS:-1200}
EPOCHS=${EPOCHS:-5}
BATCH=${BATCH:-32}
LR=${LR:-1e-3}
CONSTRAINED_WEIGHT=${CONSTRAINED_WEIGHT:-1.0}
SCOPE=${SCOPE:-uncapped}
DEV_TURNS=${DEV_TURNS:-400}
THREADS=${THREADS:-2}
SEED=${SEED:-20261124}
OUT=${OUT:-$root/models/gsr-opendialkg}
QUANTIZE=${QUANTIZE:-1}

PY=$(bash tools/gsr/venv.sh)
source tools/setup.sh
cargo build --release --locked --bin trellis
bin="$CARGO_TARGET_DIR/release/trellis"
mkdir -p "$run"
say() { echo "train.sh: $*" >&2; }

[ -f "$run/tokenizer.json" ] || { say "tokenizer"; "$PY" tools/train/tokenizer.py --out "$run/tokenizer.json"; }

# A spec-only model directory (no ONNX files yet): what `trellis targets` needs.
spec="$run/spec"
if [ ! -f "$spec/config.json" ]; then
    mkdir -p "$spec"
    cp "$run/tokenizer.json" tools/train/trellis.json "$spec/"
    "$PY" - "$spec" "$SHAPE" "$SEED" <<'PY'
import sys
sys.path.insert(0, "tools/train")
from tokenizers import Tokenizer
from train import make_model
spec, shape, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
make_model(shape, Tokenizer.from_file(f"{spec}/tokenizer.json").get_vocab_size(), seed).config.to_json_file(f"{spec}/config.json")
PY
fi

store_for() { # NAME FILES...
    local store="$run/$1"; shift
    if [ ! -f "$store/.indexed" ]; then
        rm -rf "$store"
        say "store $store"
        "$bin" ingest --store "$store" --on-error skip --rejects "$store.rejects.tsv" "$@"
        "$bin" index-tokens --store "$store" --tokenizer "$run/tokenizer.json" --linearization trellis
        touch "$store/.indexed"
    fi
}
store_for store-train "$data/kg.tsv" "$data/kg_train_paths.tsv"
store_for store-dev "$data/kg.tsv"

if [ ! -f "$run/train-targets.jsonl" ]; then
    say "training targets"
    "$bin" targets --store "$run/store-train" --model "$spec" --dialogs "$data/dialogs_train.csv" --scope "$SCOPE" --output "$run/train-targets.part"
    mv "$run/train-targets.part" "$run/train-targets.jsonl"
fi

common=(--run "$run" --tokenizer "$run/tokenizer.json" --shape "$SHAPE" --seed "$SEED" --threads "$THREADS" --lr "$LR")
if [ ! -d "$run/recon/final" ]; then
    say "stage 1: knowledge-graph reconstruction"
    "$PY" tools/train/train.py recon "${common[@]}" --kg "$data/kg.tsv" "$data/kg_train_paths.tsv" --steps "$RECON_STEPS"
fi
say "stage 2: retrieval"
"$PY" tools/train/train.py retrieval "${common[@]}" --init "$run/recon/final" --targets "$run/train-targets.jsonl" \
    --epochs "$EPOCHS" --batch "$BATCH" --constrained-weight "$CONSTRAINED_WEIGHT" \
    --trellis "$bin" --trellis-json tools/train/trellis.json --dev-store "$run/store-dev" \
    --dev-dialogs "$data/dialogs_dev.csv" --dev-turns "$DEV_TURNS"

q=()
[ "$QUANTIZE" = 1 ] && q=(--quantize)
"$PY" tools/train/export.py --hf "$run/retrieval/best/hf" --tokenizer "$run/tokenizer.json" \
    --trellis-json tools/train/trellis.json --out "$OUT" "${q[@]}"
say "done: $OUT (dev history in $run/retrieval/history.json)"
