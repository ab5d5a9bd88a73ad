#!/usr/bin/env bash
# Creates (or reuses) the Python venv of the response-metric references from
# tools/metrics/requirements.txt and prints its python. Usage:
#   PY=$(tools/metrics/venv.sh) && $PY tools/metrics/reference.py
# VENV overrides the location (default ~/.cache/trellis/venv-metrics). About 140 MB.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${VENV:-$HOME/.cache/trellis/venv-metrics}
req="$root/tools/metrics/requirements.txt"
if ! "$venv/bin/python" -c "import sacrebleu, rouge_score, nltk" 2>/dev/null; then
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet -r "$req" >&2
fi
echo "$venv/bin/python"
