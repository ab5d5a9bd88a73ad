#!/usr/bin/env bash
# Is training reproducible on this machine? Runs the retriever's training command
# (tools/train/train.sh, ONLY=retriever) twice from nothing into two run folders, short
# (RECON_STEPS reconstruction batches, STOP_AFTER retrieval steps), and compares every stage's
# output: the tokenizer and the training targets byte for byte, the reconstruction stage's
# final weights and the retrieval stage's checkpoint (weights, optimizer, scheduler) tensor by
# tensor. Equal outputs at every stage mean the whole command gives the same model, hence
# the same dev path@1; the first difference is printed and the script fails.
#
#   bash tools/train/repro_check.sh [WORK]     # default ~/.cache/trellis/train/repro
#
# Knobs: RECON_STEPS (default 50), STOP_AFTER (default 50), THREADS (default 2).
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${1:-$HOME/.cache/trellis/train/repro}
export RECON_STEPS=${RECON_STEPS:-50} STOP_AFTER=${STOP_AFTER:-50} THREADS=${THREADS:-2} ONLY=retriever
PY=$(bash tools/venv.sh train)
rm -rf "$work"
mkdir -p "$work"
for r in a b; do
    echo "repro_check: run $r" >&2
    start=$(date +%s)
    bash tools/train/train.sh "$work/$r" >"$work/$r.log" 2>&1 || { tail -20 "$work/$r.log" >&2; exit 1; }
    echo "repro_check: run $r took $(($(date +%s) - start)) s (log $work/$r.log)" >&2
done
for f in tokenizer.json train-targets.jsonl; do
    cmp "$work/a/$f" "$work/b/$f"
    echo "repro_check: $f identical ($(wc -c <"$work/a/$f") bytes)" >&2
done
"$PY" - "$work/a" "$work/b" <<'PY'
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

a, b = Path(sys.argv[1]), Path(sys.argv[2])


def same(x, y, where):
    if isinstance(x, torch.Tensor):
        assert isinstance(y, torch.Tensor) and x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), f"{where} differs"
        return 1
    if isinstance(x, dict):
        assert isinstance(y, dict) and x.keys() == y.keys(), f"{where}: keys differ"
        return sum(same(x[k], y[k], f"{where}.{k}") for k in x)
    if isinstance(x, (list, tuple)):
        assert isinstance(y, (list, tuple)) and len(x) == len(y), f"{where}: lengths differ"
        return sum(same(u, v, f"{where}[{i}]") for i, (u, v) in enumerate(zip(x, y)))
    assert x == y, f"{where}: {x!r} != {y!r}"
    return 0


recon = [load_file(d / "recon/final/model.safetensors") for d in (a, b)]
n = same(recon[0], recon[1], "recon/final")
print(f"repro_check: reconstruction weights identical ({n} tensors)", file=sys.stderr)
ck = [torch.load(d / "retrieval/last.pt", map_location="cpu", weights_only=False) for d in (a, b)]
for part in ("model", "opt", "sched", "state"):
    n = same(ck[0][part], ck[1][part], f"retrieval/last.pt {part}")
    print(f"repro_check: retrieval checkpoint {part} identical ({n} tensors)", file=sys.stderr)
print(f"repro_check: retrieval step {ck[0]['state']['step']}, loss {ck[0]['state']['loss']:.6f} in both runs", file=sys.stderr)
PY
echo "repro_check: the two runs are identical at every stage" >&2
