#!/usr/bin/env bash
# Issue 36's layers-kept point: the shipped stage-2 MiniLM cross-encoder cut to 3 of its 6
# layers (1, 3, 5: encoders.py --keep-layers) and trained two more epochs on the turns whose
# gold is in the pool (resumable: rerun this file). Paths are this machine's run folder
# (~/.cache/trellis/train/minilm-run/run, made by minilm.sh).
cd "$(dirname "$0")/../.."
export ORT_DYLIB_PATH=$HOME/.cache/trellis/onnxruntime/libonnxruntime.so.1.31.1 OMP_NUM_THREADS=1
exec nice -n 19 $HOME/.cache/trellis/venv-encoders/bin/python tools/train/encoders.py rerank --run $HOME/.cache/trellis/train/minilm-run/run --init $HOME/.cache/trellis/train/minilm-run/run/init/hf --tokenizer $HOME/.cache/trellis/train/minilm-run/run/init/gen-tokenizer.json \
  --seed 20261126 --threads 1 --trellis $HOME/.cache/trellis/bin-train/trellis --dev-store $HOME/.cache/trellis/train/minilm-run/run/store-dev \
  --dev-dialogs /work/shared/data/opendialkg/dialogs_dev.csv --dev-turns 400 \
  --rows $HOME/.cache/trellis/train/minilm-run/run/rows-pool.jsonl --batch 8 --negatives 7 --pool 25 --max-length 96 --dev-retriever gsr --dev-pool pcst \
  --dev-gsr-model /work/main/models/gsr-opendialkg --name rerank-l3 --found-only \
  --init-weights $HOME/.cache/trellis/train/minilm-run/run/rerank-found/epoch-2/weights.pt --keep-layers 3 --epochs 2 --lr 1e-4 --checkpoint-minutes 5
