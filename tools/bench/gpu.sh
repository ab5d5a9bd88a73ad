#!/usr/bin/env bash
# Trellis's CUDA path, measured on a machine with an NVIDIA GPU (issue 37). In one run:
#   1. refuses, with exit status 2, where no NVIDIA GPU is found (nvidia-smi lists none);
#   2. gets ONNX Runtime's GPU library (the onnxruntime-gpu==1.31.1 wheel, fetched with pip or
#      taken from GPU_WHEEL) and the CUDA 13 / cuDNN 9 libraries of pip's nvidia-* packages
#      where Python has them, and checks `trellis doctor --device cuda` on both shipped models;
#   3. the goldens on CUDA: the fixture retriever (tests/fixtures/gsr, both layouts, all seven
#      prior modes) against the transformers reference of tests/fixtures/gsr/goldens.json
#      (tools/bench/gpu_compare.py goldens: the same tokens, scores within 1e-4, as the CPU
#      test holds them);
#   4. the shipped retriever (gsr) and the chain (gsr + generator, `trellis run`) over N requests
#      on the bundled sample graph at --batch 1 and 64, on the CPU and on CUDA: turns/s,
#      replies/s and decoder tokens/s (the --json summaries' decoder token counts), and CUDA's answers against the CPU's (the same paths in
#      the same order, scores within TOL, default 1e-3; the same replies);
#   5. writes the table to RESULTS (default gpu-results-DATE.md) and prints it.
#
#   [BIN=path/to/trellis] [GPU_WHEEL=onnxruntime_gpu-1.31.1-...whl] [N=256] [TOL=1e-3]
#   [RESULTS=FILE] [DRY_RUN_ON_CPU=1] bash tools/bench/gpu.sh
#
# BIN: a built `trellis` (a GPU machine without network cannot build one; carry it there);
# otherwise the script builds this checkout (tools/setup.sh). Requests: the first N OpenDialKG
# dev requests when ../shared/data is there (TRELLIS_SHARED_DATA), else N made from the sample
# graph's films (tools/bench/gpu_compare.py requests). DRY_RUN_ON_CPU=1 runs every step with
# --device cpu in place of cuda, to check the script itself where there is no GPU: its
# figures then say nothing about a GPU and its results file says so.
set -euo pipefail
cd "$(dirname "$0")/../.."
device=cuda
if [ "${DRY_RUN_ON_CPU:-0}" = 1 ]; then
    device=cpu
    gpus="none (DRY_RUN_ON_CPU=1: every step ran with --device cpu; no figure here is a GPU's)"
elif ! command -v nvidia-smi >/dev/null 2>&1 || ! gpus=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null) || [ -z "$gpus" ]; then
    echo "tools/bench/gpu.sh: no NVIDIA GPU here (nvidia-smi is missing or lists no device). This script measures Trellis's CUDA path and needs a GPU; on this machine the CPU path is what runs (README: CUDA is built and untested). DRY_RUN_ON_CPU=1 checks the script itself without one." >&2
    exit 2
fi
n="${N:-256}"
tol="${TOL:-1e-3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/trellis-gpu.XXXXXX")"
results="${RESULTS:-gpu-results-$(date -u +%Y-%m-%d).md}"
py=python3

# 2. ONNX Runtime with the CUDA provider. ORT_DYLIB_PATH, when set, wins.
if [ "$device" = cuda ] && [ -z "${ORT_DYLIB_PATH:-}" ]; then
    ort_dir="$HOME/.cache/trellis/onnxruntime-gpu"
    if [ ! -f "$ort_dir/libonnxruntime.so.1.31.1" ]; then
        wheel="${GPU_WHEEL:-}"
        if [ -z "$wheel" ]; then
            echo "gpu.sh: fetching onnxruntime-gpu==1.31.1 (about 256 MB)" >&2
            $py -m pip download --quiet --no-deps --only-binary=:all: -d "$work/wheel" onnxruntime-gpu==1.31.1 >&2 || {
                echo "gpu.sh: pip could not fetch onnxruntime-gpu==1.31.1; download it where there is a network and pass GPU_WHEEL=FILE" >&2
                exit 1
            }
            wheel=$(ls "$work"/wheel/onnxruntime_gpu-*.whl)
        fi
        mkdir -p "$ort_dir"
        $py - "$wheel" "$ort_dir" <<'PY'
import sys, zipfile, os
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        base = os.path.basename(name)
        if "/capi/" in name and base.startswith("libonnxruntime"):
            with z.open(name) as src, open(os.path.join(out, base), "wb") as dst:
                dst.write(src.read())
PY
    fi
    export ORT_DYLIB_PATH="$ort_dir/libonnxruntime.so.1.31.1"
    # CUDA 13 and cuDNN 9 from pip's nvidia-* packages (torch's), when Python has them.
    libs=$($py -c 'import glob, os, nvidia; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/*.so*")})))' 2>/dev/null || true)
    [ -n "$libs" ] && export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

if [ -n "${BIN:-}" ]; then
    bin="$BIN"
else
    source tools/setup.sh
    cargo build --release --locked --bin trellis >&2
    bin="$CARGO_TARGET_DIR/release/trellis"
fi
gsr=models/gsr-opendialkg
generator=models/generator-opendialkg
for m in "$gsr" "$generator"; do
    "$bin" doctor --device "$device" --model "$m" >"$work/doctor.txt" 2>&1 || {
        cat "$work/doctor.txt" >&2
        echo "gpu.sh: trellis doctor --device $device failed on $m (above): the CUDA provider did not register, or the model does not run there" >&2
        exit 1
    }
done

# 3. The goldens on the device.
"$py" tools/bench/gpu_compare.py goldens "$bin" "$device" "$work" >"$work/goldens.txt"

# 4. The shipped models on the sample graph.
store="$work/kg"
"$bin" ingest --store "$store" tests/fixtures/opendialkg-sample.tsv >/dev/null
"$bin" index-tokens --store "$store" --tokenizer "$gsr/tokenizer.json" --linearization trellis >/dev/null
data="${TRELLIS_SHARED_DATA:-../shared/data}"
if [ -f "$data/opendialkg/dialogs_dev.csv" ]; then
    # Not a pipe into head: under pipefail its early exit would fail the writer.
    $py tools/data/opendialkg_requests.py "$data/opendialkg/dialogs_dev.csv" >"$work/all-requests.jsonl" 2>/dev/null
    head -n "$n" "$work/all-requests.jsonl" >"$work/requests.jsonl"
    source_note="the first $n OpenDialKG dev requests"
else
    "$py" tools/bench/gpu_compare.py requests tests/fixtures/opendialkg-sample.tsv "$n" >"$work/requests.jsonl"
    source_note="$n requests made from the sample graph's films (no ../shared/data here)"
fi
rows=()
for cmd in retrieve run; do
    extra=()
    [ "$cmd" = run ] && extra=(--generator "$generator")
    for batch in 1 64; do
        for dev in cpu "$device"; do
            out="$work/$cmd-$batch-$dev.jsonl"
            [ -f "$out" ] && continue
            start=$(date +%s.%N)
            "$bin" "$cmd" --store "$store" --retriever gsr --model "$gsr" "${extra[@]}" --device "$dev" --batch "$batch" \
                --input "$work/requests.jsonl" --output "$out" --json >"${out%.jsonl}.summary.json" 2>"$work/err.txt" || {
                cat "$work/err.txt" >&2
                exit 1
            }
            end=$(date +%s.%N)
            rows+=("$cmd $batch $dev $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')")
        done
    done
done
printf '%s\n' "${rows[@]}" >"$work/times.txt"
"$py" tools/bench/gpu_compare.py report "$work" "$device" "$tol" "$gpus" "$source_note" "$bin" >"$results"
cat "$results"
echo "gpu.sh: results in $results (work files in $work)" >&2
