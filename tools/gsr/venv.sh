#!/usr/bin/env bash
# Creates (or reuses) the Python venv of the GSR tools from tools/requirements.txt and prints
# its python. Usage: PY=$(tools/gsr/venv.sh) && $PY tools/gsr/make_fixture.py
# VENV overrides the location (default ~/.cache/trellis/venv-tools). About 6 GB: PyPI's torch
# pulls CUDA wheels even for CPU use.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${VENV:-$HOME/.cache/trellis/venv-tools}
req="$root/tools/requirements.txt"
if ! "$venv/bin/python" -c "import torch, transformers, optimum.exporters.onnx, onnxruntime, tokenizers" 2>/dev/null; then
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet -r "$req" >&2
fi
echo "$venv/bin/python"
