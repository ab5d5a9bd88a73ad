#!/usr/bin/env bash
# Trains the encoder models (issue 23) on the OpenDialKG training dialogs and ships them:
# a bi-encoder for `--retriever dense` and a cross-encoder for `--rerank`, both a T5 encoder
# initialised from a trained generator's (tools/train/encoders.py says how), or, with INIT a
# BERT-style sentence-transformers directory, from that pretrained encoder (issue 36:
# tools/train/minilm.sh sets the knobs for all-MiniLM-L6-v2):
#
#   bash tools/train/encoders.sh [RUN_DIR]        # default ~/.cache/trellis/train/enc-run
#
# Steps (each skipped when its output exists, so a rerun resumes an interrupted run; the
# trainings go on from their last checkpoint):
#   1. the venv (`tools/venv.sh train`) and the trellis binary; INIT (a saved T5, its `hf`
#      folder) and INIT_TOKENIZER copied into RUN_DIR/init (what the run trains from, kept);
#   2. the training requests (tools/data/opendialkg_requests.py on dialogs_train.csv), the
#      training store (kg.tsv + kg_train_paths.tsv) and the dev store (kg.tsv);
#   3. each training turn's candidates: `trellis retrieve --top 30` with bm25 and pcst on the
#      training store (the bi-encoder's hard negatives, `encoders.py prepare`); for the
#      cross-encoder, the pool it reranks: gsr's paths (GSR_MODEL, the store indexed with its
#      tokenizer) and pcst's, RUN/rows-pool.jsonl;
#   4. the bi-encoder (DENSE_EPOCHS; dev path@k of `--retriever dense` after each epoch, the
#      best kept) shipped to OUT_DENSE;
#   5. the cross-encoder in two stages, negatives drawn from the first RERANK_POOL of a turn's
#      pooled candidates, dev path@k of `--retriever gsr --rerank MODEL --rerank-pool pcst`
#      after each epoch: RUN/rerank, RERANK_EPOCHS of a schedule of RERANK_SCHEDULE epochs on
#      the first RERANK_TURNS turns (every turn: the gold is the positive even where no
#      retriever found it); then RUN/rerank-found, from stage 1's last epoch, FOUND_EPOCHS at
#      FOUND_LR on the turns whose gold is in the pool (what reranking can put first), its best
#      epoch shipped to OUT_RERANK.
#
# Knobs (environment): ONLY (dense | rerank), INIT, INIT_TOKENIZER, THREADS, SEED, DEV_TURNS
# (dev turns scored between epochs; 0 = all), DENSE_EPOCHS, DENSE_LR, DENSE_BATCH,
# DENSE_NEGATIVES, TEMPERATURE, RERANK_EPOCHS, RERANK_LR, RERANK_BATCH, RERANK_NEGATIVES,
# RERANK_TURNS (0 = all), RERANK_SCHEDULE, RERANK_POOL, RERANK_MAX_LENGTH, FOUND_EPOCHS, FOUND_LR,
# GSR_MODEL, OUT_DENSE, OUT_RERANK, STOP_AFTER (checks: stop after this many
# steps, nothing shipped).
# Issue 36's (unset: encoders.py's defaults, the runs above): DENSE_MAX_LENGTH (tokens per
# text), DENSE_POOL (negatives drawn from a turn's first this many candidates), DENSE_TURNS
# (the first this many training turns), FREEZE_LAYERS (embeddings and the lowest N layers kept
# as initialised, both models), CHECKPOINT_MINUTES; TRELLIS_BIN (a built trellis: no cargo
# build, no tools/setup.sh) and PY (the python to train with; default tools/venv.sh train).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
run=${1:-$HOME/.cache/trellis/train/enc-run}
data=${TRELLIS_SHARED_DATA:-$root/../shared/data}/opendialkg
INIT=${INIT:-$HOME/.cache/trellis/train/gen-delex/generator/epoch-6/hf}
# A sentence-transformers directory (modules.json) carries its own tokenizer.
if [ -f "$INIT/modules.json" ]; then INIT_TOKENIZER=${INIT_TOKENIZER:-$INIT/tokenizer.json}; fi
INIT_TOKENIZER=${INIT_TOKENIZER:-$HOME/.cache/trellis/train/gen-delex/gen-tokenizer.json}
THREADS=${THREADS:-1}
SEED=${SEED:-20261126}
DEV_TURNS=${DEV_TURNS:-400}
DENSE_EPOCHS=${DENSE_EPOCHS:-2}
DENSE_LR=${DENSE_LR:-2e-4}
DENSE_BATCH=${DENSE_BATCH:-32}
DENSE_NEGATIVES=${DENSE_NEGATIVES:-7}
TEMPERATURE=${TEMPERATURE:-0.05}
RERANK_EPOCHS=${RERANK_EPOCHS:-1}
RERANK_SCHEDULE=${RERANK_SCHEDULE:-2}
FOUND_EPOCHS=${FOUND_EPOCHS:-2}
FOUND_LR=${FOUND_LR:-3e-4}
RERANK_LR=${RERANK_LR:-5e-4}
RERANK_BATCH=${RERANK_BATCH:-8}
RERANK_NEGATIVES=${RERANK_NEGATIVES:-10}
RERANK_TURNS=${RERANK_TURNS:-0}
RERANK_POOL=${RERANK_POOL:-25}
RERANK_MAX_LENGTH=${RERANK_MAX_LENGTH:-128}
GSR_MODEL=${GSR_MODEL:-$root/models/gsr-opendialkg}
OUT_DENSE=${OUT_DENSE:-$root/models/dense-opendialkg}
OUT_RERANK=${OUT_RERANK:-$root/models/rerank-opendialkg}
ONLY=${ONLY:-}
STOP_AFTER=${STOP_AFTER:-}
dense_extra=() rerank_extra=()
[ -n "${DENSE_MAX_LENGTH:-}" ] && dense_extra+=(--max-length "$DENSE_MAX_LENGTH")
[ -n "${DENSE_POOL:-}" ] && dense_extra+=(--pool "$DENSE_POOL")
[ -n "${DENSE_TURNS:-}" ] && dense_extra+=(--limit "$DENSE_TURNS")
[ -n "${FREEZE_LAYERS:-}" ] && { dense_extra+=(--freeze-layers "$FREEZE_LAYERS"); rerank_extra+=(--freeze-layers "$FREEZE_LAYERS"); }
[ -n "${CHECKPOINT_MINUTES:-}" ] && { dense_extra+=(--checkpoint-minutes "$CHECKPOINT_MINUTES"); rerank_extra+=(--checkpoint-minutes "$CHECKPOINT_MINUTES"); }
case "$ONLY" in
    "" | dense | rerank) ;;
    *) echo "encoders.sh: ONLY must be dense or rerank (or unset for both), not '$ONLY'" >&2; exit 2 ;;
esac

PY=${PY:-$(bash tools/venv.sh train)}
if [ -n "${TRELLIS_BIN:-}" ]; then
    bin=$TRELLIS_BIN
else
    source tools/setup.sh
    cargo build --release --locked --bin trellis
    bin="$CARGO_TARGET_DIR/release/trellis"
fi
mkdir -p "$run"
say() { echo "encoders.sh: $*" >&2; }
source tools/train/lib.sh

copy_init "$INIT" "$INIT_TOKENIZER"
tok="$run/init/gen-tokenizer.json"

[ -f "$run/req-train.jsonl" ] || python3 tools/data/opendialkg_requests.py "$data/dialogs_train.csv" -o "$run/req-train.jsonl"
store_for store-train "$data/kg.tsv" "$data/kg_train_paths.tsv"
store_for store-dev "$data/kg.tsv"
for r in bm25 pcst; do
    [ -f "$run/$r-train.jsonl" ] || "$bin" retrieve --store "$run/store-train" --retriever "$r" --top 30 --threads "$THREADS" \
        --input "$run/req-train.jsonl" --output "$run/$r-train.jsonl" --json
done
[ -f "$run/rows.jsonl" ] || "$PY" tools/train/encoders.py prepare --run "$run" --requests "$run/req-train.jsonl" \
    --candidates "$run/bm25-train.jsonl" "$run/pcst-train.jsonl"

common=(--run "$run" --init "$run/init/hf" --tokenizer "$tok" --seed "$SEED" --threads "$THREADS" --trellis "$bin"
    --dev-store "$run/store-dev" --dev-dialogs "$data/dialogs_dev.csv" --dev-turns "$DEV_TURNS" ${STOP_AFTER:+--stop-after "$STOP_AFTER"})
if [ "$ONLY" != rerank ]; then
    say "bi-encoder"
    "$PY" tools/train/encoders.py dense "${common[@]}" --epochs "$DENSE_EPOCHS" --lr "$DENSE_LR" --batch "$DENSE_BATCH" \
        --negatives "$DENSE_NEGATIVES" --temperature "$TEMPERATURE" "${dense_extra[@]}"
    [ -n "$STOP_AFTER" ] || "$PY" tools/train/encoders.py ship --run "$run" --task dense --out "$OUT_DENSE"
fi
if [ "$ONLY" != dense ]; then
    say "cross-encoder"
    # gsr needs its tokenizer's token index in both stores (re-indexing replaces an index).
    for s in store-train store-dev; do
        [ -f "$run/$s/.gsr-indexed" ] || { "$bin" index-tokens --store "$run/$s" --tokenizer "$GSR_MODEL/tokenizer.json" \
            --linearization trellis && touch "$run/$s/.gsr-indexed"; }
    done
    [ -f "$run/gsr-train.jsonl" ] || "$bin" retrieve --store "$run/store-train" --retriever gsr --model "$GSR_MODEL" --top 20 \
        --model-threads "$THREADS" --input "$run/req-train.jsonl" --output "$run/gsr-train.jsonl" --json
    [ -f "$run/rows-pool.jsonl" ] || "$PY" tools/train/encoders.py prepare --run "$run" --requests "$run/req-train.jsonl" \
        --candidates "$run/gsr-train.jsonl" "$run/pcst-train.jsonl" --out "$run/rows-pool.jsonl"
    limit=()
    [ "$RERANK_TURNS" != 0 ] && limit=(--limit "$RERANK_TURNS")
    rr=(--rows "$run/rows-pool.jsonl" --batch "$RERANK_BATCH" --negatives "$RERANK_NEGATIVES" --pool "$RERANK_POOL"
        --max-length "$RERANK_MAX_LENGTH" --dev-retriever gsr --dev-pool pcst --dev-gsr-model "$GSR_MODEL")
    "$PY" tools/train/encoders.py rerank "${common[@]}" "${rr[@]}" --epochs "$RERANK_EPOCHS" --schedule-epochs "$RERANK_SCHEDULE" \
        --lr "$RERANK_LR" "${limit[@]}" "${rerank_extra[@]}"
    if [ -z "$STOP_AFTER" ]; then
        "$PY" tools/train/encoders.py rerank "${common[@]}" "${rr[@]}" --name rerank-found --found-only \
            --init-weights "$run/rerank/epoch-$RERANK_EPOCHS/weights.pt" --epochs "$FOUND_EPOCHS" --lr "$FOUND_LR" "${rerank_extra[@]}"
        "$PY" tools/train/encoders.py ship --run "$run" --task rerank --name rerank-found --out "$OUT_RERANK"
    fi
fi
say "done"
