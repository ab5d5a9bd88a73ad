#!/usr/bin/env bash
# Trains the generative retriever and the response generator on OpenDialKG from nothing, in
# one command, and exports them:
#
#   bash tools/train/train.sh [RUN_DIR]            # default ~/.cache/trellis/train/run
#
# Steps (each skipped when its output exists, so a rerun resumes an interrupted run):
#   1. the Python venv (`tools/venv.sh train`) and the trellis binary;
#   2. the tokenizer (tools/train/tokenizer.py);
#   3. two stores: the training KG (kg.tsv + kg_train_paths.tsv) for the training targets, the
#      dev KG (kg.tsv, the store every baseline is measured on) for dev scores; token indexes
#      built with the new tokenizer;
#   4. `trellis targets` on the training dialogs: encoder inputs, gold paths as token ids and
#      the constraint's allowed sets, exactly as the decoder sees them;
#   5. stage 1, knowledge-graph reconstruction (RECON_STEPS batches);
#   6. stage 2, retrieval training (EPOCHS), dev path@k by Trellis after each epoch;
#   7. the best epoch exported (int8 weights, QUANTIZE=0 for float) to OUT;
#   8. the generator's own tokenizer (cased, with the delexicalization placeholders:
#      tokenizer.py --generator 12) and its targets: `trellis targets` with a generator spec
#      (tools/train/generator.json) on the training and the dev dialogs (encoder input with the
#      gold paths, reply ids, entity names replaced by placeholders as the engine does);
#   9. stage 3, the generator (GEN_EPOCHS, from nothing or GEN_INIT), dev loss after each epoch;
#  10. its best epoch exported (int8 unless QUANTIZE=0) to OUT_GEN.
#
# Knobs (environment): ONLY (retriever | generator; default both), SHAPE (small-cpu |
# base-gpu), RECON_STEPS, EPOCHS, BATCH, LR, CONSTRAINED_WEIGHT, SCOPE (uncapped | capped: the
# allowed sets trained on), DEV_TURNS (dev turns scored between epochs; 0 = all), GEN_EPOCHS,
# GEN_LR, GEN_BATCH, GEN_MAX_TARGET (reply ids trained on), GEN_MINUTES (the generator stage
# stops cleanly after this many minutes; a rerun goes on), GEN_INIT (a saved generator, its
# `hf` folder, to go on training from instead of starting from nothing; RUN_DIR must then hold
# that generator's gen-tokenizer.json), GEN_WITHOUT_KNOWLEDGE=SHARE (also train on this share, 0 to 1,
# of the replies that follow no action, with an empty knowledge, drawn with SEED: `trellis
# targets --without-knowledge`; 0, the default, trains on the replies with knowledge only), THREADS,
# SEED, OUT, OUT_GEN,
# STOP_AFTER (checks: the retrieval stage stops after this many steps and nothing is exported;
# tools/train/repro_check.sh). CUDA is used when torch sees a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
run=${1:-$HOME/.cache/trellis/train/run}
data=${TRELLIS_SHARED_DATA:-$root/../shared/data}/opendialkg
SHAPE=${SHAPE:-small-cpu}
RECON_STEPS=${RECON_STEPS:-400}
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
ONLY=${ONLY:-}
GEN_EPOCHS=${GEN_EPOCHS:-2}
GEN_LR=${GEN_LR:-1e-3}
GEN_BATCH=${GEN_BATCH:-32}
GEN_MAX_TARGET=${GEN_MAX_TARGET:-64}
GEN_MINUTES=${GEN_MINUTES:-}
GEN_INIT=${GEN_INIT:-}
GEN_WITHOUT_KNOWLEDGE=${GEN_WITHOUT_KNOWLEDGE:-0}
OUT_GEN=${OUT_GEN:-$root/models/generator-opendialkg}
STOP_AFTER=${STOP_AFTER:-}
[[ "$GEN_WITHOUT_KNOWLEDGE" =~ ^(0(\.[0-9]+)?|1(\.0+)?)$ ]] || {
    echo "train.sh: GEN_WITHOUT_KNOWLEDGE must be a share from 0 to 1 (like 0.25), not '$GEN_WITHOUT_KNOWLEDGE'" >&2; exit 2; }
if [ -n "$GEN_INIT" ]; then
    [ -f "$GEN_INIT/config.json" ] || { echo "train.sh: GEN_INIT=$GEN_INIT has no config.json (want a generator's saved hf folder)" >&2; exit 2; }
    [ -f "$run/gen-tokenizer.json" ] || { echo "train.sh: GEN_INIT needs the tokenizer it was trained with in $run/gen-tokenizer.json" >&2; exit 2; }
fi
case "$ONLY" in
    "" | retriever | generator) ;;
    *) echo "train.sh: ONLY must be retriever or generator (or unset for both), not '$ONLY'" >&2; exit 2 ;;
esac

PY=$(bash tools/venv.sh train)
source tools/setup.sh
cargo build --release --locked --bin trellis
bin="$CARGO_TARGET_DIR/release/trellis"
mkdir -p "$run"
say() { echo "train.sh: $*" >&2; }

[ "$ONLY" = generator ] || [ -f "$run/tokenizer.json" ] || { say "tokenizer"; "$PY" tools/train/tokenizer.py --out "$run/tokenizer.json"; }
[ "$ONLY" = retriever ] || [ -f "$run/gen-tokenizer.json" ] || {
    say "generator tokenizer"
    "$PY" tools/train/tokenizer.py --generator 12 --out "$run/gen-tokenizer.json"
}

# A spec-only model directory (no ONNX files yet): what `trellis targets` needs.
make_spec() { # DIR TRELLIS_JSON TOKENIZER
    local spec=$1
    [ -f "$spec/config.json" ] && return
    mkdir -p "$spec"
    cp "$3" "$spec/tokenizer.json"
    cp "$2" "$spec/trellis.json"
    # Run from the repository root: `tools` is importable (tools/train/t5.py, the one builder).
    "$PY" - "$spec" "$SHAPE" "$SEED" <<'PY'
import sys
from tokenizers import Tokenizer
from tools.train import t5
spec, shape, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
t5.build(shape, Tokenizer.from_file(f"{spec}/tokenizer.json").get_vocab_size(), seed).config.to_json_file(f"{spec}/config.json")
PY
}
spec="$run/spec"
gen_spec="$run/gen-spec"
[ "$ONLY" = generator ] || make_spec "$spec" tools/train/trellis.json "$run/tokenizer.json"
[ "$ONLY" = retriever ] || make_spec "$gen_spec" tools/train/generator.json "$run/gen-tokenizer.json"

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
if [ "$ONLY" != generator ]; then
    store_for store-train "$data/kg.tsv" "$data/kg_train_paths.tsv"
    store_for store-dev "$data/kg.tsv"
fi

if [ "$ONLY" != generator ] && [ ! -f "$run/train-targets.jsonl" ]; then
    say "training targets"
    "$bin" targets --store "$run/store-train" --model "$spec" --dialogs "$data/dialogs_train.csv" --scope "$SCOPE" --output "$run/train-targets.part"
    mv "$run/train-targets.part" "$run/train-targets.jsonl"
fi

common=(--run "$run" --tokenizer "$run/tokenizer.json" --shape "$SHAPE" --seed "$SEED" --threads "$THREADS" --lr "$LR")
if [ "$ONLY" != generator ] && [ ! -d "$run/recon/final" ]; then
    say "stage 1: knowledge-graph reconstruction"
    "$PY" tools/train/train.py recon "${common[@]}" --kg "$data/kg.tsv" "$data/kg_train_paths.tsv" --steps "$RECON_STEPS"
fi
q=()
[ "$QUANTIZE" = 1 ] && q=(--quantize)
if [ "$ONLY" != generator ]; then
    say "stage 2: retrieval"
    "$PY" tools/train/train.py retrieval "${common[@]}" --init "$run/recon/final" --targets "$run/train-targets.jsonl" \
        --epochs "$EPOCHS" --batch "$BATCH" --constrained-weight "$CONSTRAINED_WEIGHT" \
        --trellis "$bin" --trellis-json tools/train/trellis.json --dev-store "$run/store-dev" \
        --dev-dialogs "$data/dialogs_dev.csv" --dev-turns "$DEV_TURNS" ${STOP_AFTER:+--stop-after "$STOP_AFTER"}
    [ -n "$STOP_AFTER" ] && { say "stopped after $STOP_AFTER retrieval steps (STOP_AFTER): nothing exported"; exit 0; }
    # int8 with activation scales calibrated on the first 2,000 training targets (static_quant.py).
    cal=()
    [ "$QUANTIZE" = 1 ] && cal=(--calibration "$run/train-targets.jsonl")
    "$PY" tools/train/export.py --hf "$run/retrieval/best/hf" --tokenizer "$run/tokenizer.json" \
        --trellis-json tools/train/trellis.json --out "$OUT" "${q[@]}" "${cal[@]}"
    say "retriever done: $OUT (dev history in $run/retrieval/history.json)"
fi
[ "$ONLY" = retriever ] && exit 0

gen_targets() { # NAME DIALOGS [FLAGS...] (a generator's targets read no store)
    if [ ! -f "$run/$1.jsonl" ]; then
        say "generator targets $1"
        "$bin" targets --model "$gen_spec" --dialogs "$2" --output "$run/$1.part" "${@:3}"
        mv "$run/$1.part" "$run/$1.jsonl"
    fi
}
gen_targets gen-train-targets "$data/dialogs_train.csv"
train_targets=gen-train-targets
if [[ ! "$GEN_WITHOUT_KNOWLEDGE" =~ ^0(\.0*)?$ ]]; then
    gen_targets gen-train-targets-all "$data/dialogs_train.csv" --without-knowledge
    train_targets="gen-train-targets-mixed-$GEN_WITHOUT_KNOWLEDGE-$SEED"
    if [ ! -f "$run/$train_targets.jsonl" ]; then
        say "generator targets $train_targets"
        # Every reply with knowledge, and the drawn share of those without: the lines of the
        # --without-knowledge targets whose turn the plain targets do not have.
        "$PY" - "$run" "$train_targets" "$GEN_WITHOUT_KNOWLEDGE" "$SEED" <<'PY'
import json, random, sys
run, name, share, seed = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
turn = lambda line: (lambda r: (r["dialog"], r["upto"]))(json.loads(line))
with open(f"{run}/gen-train-targets.jsonl", encoding="utf-8") as f:
    known = f.readlines()
have = {turn(l) for l in known}
with open(f"{run}/gen-train-targets-all.jsonl", encoding="utf-8") as f:
    extra = [l for l in f if turn(l) not in have]
rng = random.Random(seed)
drawn = sorted(rng.sample(range(len(extra)), round(share * len(extra))))
with open(f"{run}/{name}.part", "w", encoding="utf-8") as f:
    f.writelines(known + [extra[i] for i in drawn])
print(f"train.sh: {len(known)} lines with knowledge, {len(drawn)} of {len(extra)} without", file=sys.stderr)
PY
        mv "$run/$train_targets.part" "$run/$train_targets.jsonl"
    fi
fi
# The dev loss is always the replies with their gold knowledge: comparable across runs.
gen_targets gen-dev-targets "$data/dialogs_dev.csv"

say "stage 3: generator"
budget=()
[ -n "$GEN_MINUTES" ] && budget=(--time-budget-min "$GEN_MINUTES")
"$PY" tools/train/train.py generator --run "$run" --tokenizer "$run/gen-tokenizer.json" --shape "$SHAPE" --seed "$SEED" \
    --threads "$THREADS" --lr "$GEN_LR" --targets "$run/$train_targets.jsonl" ${GEN_INIT:+--init "$GEN_INIT"} \
    --dev-targets "$run/gen-dev-targets.jsonl" --epochs "$GEN_EPOCHS" --batch "$GEN_BATCH" \
    --max-target "$GEN_MAX_TARGET" --trellis-json tools/train/generator.json "${budget[@]}"
# Exported again only when the best changed (or the export is missing): a rerun after the
# stage finished costs nothing, one after a time-budget stop exports the newer best.
stamp="$run/generator/exported.stamp"
cal=()
[ "$QUANTIZE" = 1 ] && cal=(--calibration "$run/gen-train-targets.jsonl")
{ cat "$run/generator/best.json"; echo "$OUT_GEN ${q[*]} ${cal[*]}"; } > "$stamp.new"
if [ ! -f "$OUT_GEN/trellis.json" ] || ! cmp -s "$stamp.new" "$stamp"; then
    "$PY" tools/train/export.py --hf "$run/generator/best/hf" --tokenizer "$run/gen-tokenizer.json" \
        --trellis-json tools/train/generator.json --out "$OUT_GEN" "${q[@]}" "${cal[@]}"
    mv "$stamp.new" "$stamp"
else
    rm "$stamp.new"
fi
if grep -q '"finished": true' "$run/generator/best.json"; then
    say "generator done: $OUT_GEN (dev loss history in $run/generator/history.json)"
else
    say "generator stopped by GEN_MINUTES=$GEN_MINUTES: $OUT_GEN holds the best so far; rerun to go on"
fi
