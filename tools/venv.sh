#!/usr/bin/env bash
# Creates (or reuses) the pinned Python environment of one purpose and prints its python.
#
#   PY=$(bash tools/venv.sh PURPOSE) && "$PY" ...
#
# PURPOSE    requirements                   default location                    on disk
# onnx       tools/requirements/onnx.txt    ~/.cache/trellis/venv-onnx          about 240 MB
# metrics    tools/requirements/metrics.txt ~/.cache/trellis/venv-metrics       about 140 MB
# pcst       tools/requirements/pcst.txt    ~/.cache/trellis/venv-pcst          about 130 MB
# train      tools/requirements/train.txt   ~/.cache/trellis/venv-tools         about 5.7 GB
# encoders   tools/requirements/encoders.txt ~/.cache/trellis/venv-encoders     about 6.1 GB
#            (train's packages, sentence-transformers: tools/reference/encoder_fixtures.py; the
#            pretrained all-MiniLM-L6-v2's package: tools/train/pretrained.py)
# python     tools/requirements/python.txt  ~/.cache/trellis/venv-python        about 110 MB
#            (maturin, pytest and mypy: tools/test.sh builds the Python package into it and
#            type-checks python/tests/typed_use.py against the stubs)
# ray        tools/requirements/ray.txt     ~/.cache/trellis/venv-ray           about 660 MB
#            (the python environment and Ray Data: TRELLIS_RAY=1 bash tools/python.sh)
#
# train is big because PyPI's torch wheel is the CUDA build: it depends on 18 nvidia-*
# and cuda-* wheels (cuBLAS, cuDNN, NCCL, ...), and torch loads libcudart and libcublasLt when
# it is imported, even on a machine without a GPU, so they cannot be left out
# (tools/README.md). Which scripts need which environment: tools/README.md.
#
# VENV overrides the location. An existing environment is reused when it imports the
# purpose's key modules (nothing is installed into it then); otherwise it is created and the
# requirements installed with pip (the train one downloads about 3 GB).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
purpose=${1:-}
case "$purpose" in
    onnx) default=venv-onnx; probe="import onnx, onnxruntime, tokenizers, numpy" ;;
    metrics) default=venv-metrics; probe="import sacrebleu, rouge_score, nltk" ;;
    pcst) default=venv-pcst; probe="import numpy, pcst_fast, networkx, rank_bm25; assert numpy.__version__ < '2'" ;;
    python) default=venv-python; probe="import maturin, pytest, mypy" ;;
    ray) default=venv-ray; probe="import maturin, pytest, mypy, ray.data, pyarrow" ;;
    train) default=venv-tools; probe="import torch, transformers, optimum.exporters.onnx, onnxruntime, tokenizers" ;;
    # all_minilm_l6_v2 prints a line when imported: found, not imported.
    encoders) default=venv-encoders; probe="import importlib.util, sentence_transformers, optimum.exporters.onnx, onnxruntime, tokenizers; assert importlib.util.find_spec('all_minilm_l6_v2')" ;;
    *) echo "venv.sh: PURPOSE must be onnx, metrics, pcst, python, ray, train or encoders (tools/README.md), not '$purpose'" >&2; exit 2 ;;
esac
venv=${VENV:-$HOME/.cache/trellis/$default}
req="$root/tools/requirements/$purpose.txt"
if ! "$venv/bin/python" -c "$probe" 2>/dev/null; then
    echo "venv.sh: making the $purpose environment in $venv from $req" >&2
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet -r "$req" >&2
fi
echo "$venv/bin/python"
