#!/usr/bin/env bash
# Generative retrieval, side by side with the Python reference on the same weights, beams,
# requests and machine, in one run: dialogs/s of `trellis retrieve --retriever gsr` and of
# tools/bench/gsr_reference.py (transformers generate + the constraint/prior logits
# processor), and the share of Trellis's beam-search time spent outside ONNX Runtime.
# Usage: BENCH_DIR=/tmp/bench [DIALOGS=50] [BATCH=8] [MODEL_NORM=vocabulary|allowed]
#        [MODELS="tests/fixtures/gsr/tiny-split ~/.cache/trellis/models/t5-small-random"] bash tools/bench/gsr.sh
# MODEL_NORM (default vocabulary, the paper's): both sides normalize the model's log-softmax
# over the vocabulary or over the allowed tokens (decoding.model_norm).
# The t5-small-shaped model comes from `$(bash tools/venv.sh train) -m tools.reference.gsr_fixture
# --shape t5-small --out ~/.cache/trellis/models/t5-small-random`, after `cargo bench --bench
# decode_index` has trained the 32k tokenizer it uses (gsr_fixture says so if it is missing;
# this script checks for the model first). Both sides: katz prior, proportional, 5 beams,
# candidates from the whole OpenDialKG graph. Python's time leaves out its candidate
# retrieval (done by trellis beforehand); Trellis's includes linking and candidates but not
# loading the model. Under MODEL_NORM=allowed a model with a listed-logits step
# (decoder_listed_model.onnx, tools/train/listed_logits.py) is also run without it (a folder
# of links to its other files): the last column, every step on the whole vocabulary, and the
# two runs' answers compared (on stderr). Vocabulary normalization never uses the step: "-".
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/setup.sh
cargo build --release --locked --bin trellis >&2
bin="$CARGO_TARGET_DIR/release/trellis"
data="${TRELLIS_SHARED_DATA:-../shared/data}"
work="${BENCH_DIR:-/tmp/trellis-bench}"
dialogs="${DIALOGS:-50}"
batch="${BATCH:-8}"
model_norm="${MODEL_NORM:-vocabulary}"
models="${MODELS:-tests/fixtures/gsr/tiny-split $HOME/.cache/trellis/models/t5-small-random}"
mkdir -p "$work"
py=$(bash tools/venv.sh train)
if [ ! -f "$work/kg/CURRENT" ]; then
    "$bin" ingest --store "$work/kg" --on-error skip --rejects "$work/kg-rejects.tsv" "$data/opendialkg/kg.tsv" >&2
fi
echo "| model | dialogs | batch | Python reference dialogs/s | Trellis dialogs/s | speed-up | Trellis decoder calls (listed) | outside ONNX Runtime | load avg | Trellis dialogs/s, whole-vocabulary steps |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for model in $models; do
    if [ ! -f "$model/tokenizer.json" ]; then
        echo "skipping $model: no tokenizer.json (the t5-small one: \`cargo bench --bench decode_index\` writes its tokenizer, then \`\$(bash tools/venv.sh train) -m tools.reference.gsr_fixture --shape t5-small\` the model)" >&2
        continue
    fi
    name=$(basename "$model")
    "$bin" index-tokens --store "$work/kg" --tokenizer "$model/tokenizer.json" --linearization dialoggsr >&2
    req="$work/gsr-$name-requests.jsonl"
    OMP_WAIT_POLICY=PASSIVE "$py" -m tools.bench.gsr_reference --model "$model" --dialogs "$dialogs" --batch "$batch" --threads 2 \
        --kg "$data/opendialkg/kg.tsv" --store "$work/kg" --trellis "$bin" --requests-out "$req" --model-norm "$model_norm" >"$work/gsr-$name-python.json"
    "$bin" retrieve --store "$work/kg" --retriever gsr --model "$model" --batch "$batch" --threads 1 --model-threads 2 \
        --model-norm "$model_norm" --input "$req" --output "$work/gsr-$name-out.jsonl" --json >"$work/gsr-$name-trellis.json"
    whole=""
    if [ -f "$model/decoder_listed_model.onnx" ] && [ "$model_norm" = allowed ]; then
        plain="$work/gsr-$name-whole-vocabulary"
        rm -rf "$plain" && mkdir -p "$plain"
        for f in "$model"/*; do
            [ "$(basename "$f")" = decoder_listed_model.onnx ] || ln -s "$(realpath "$f")" "$plain/"
        done
        whole="$work/gsr-$name-trellis-whole.json"
        "$bin" retrieve --store "$work/kg" --retriever gsr --model "$plain" --batch "$batch" --threads 1 --model-threads 2 \
            --model-norm "$model_norm" --input "$req" --output "$work/gsr-$name-out-whole.jsonl" --json >"$whole"
        python3 - "$work/gsr-$name-out.jsonl" "$work/gsr-$name-out-whole.jsonl" <<'PY'
import json, sys
a = [json.loads(line) for line in open(sys.argv[1])]
b = [json.loads(line) for line in open(sys.argv[2])]
same = sum([p["triples"] for p in x["paths"]] == [p["triples"] for p in y["paths"]] for x, y in zip(a, b))
worst = max((abs(p["score"] - q["score"]) for x, y in zip(a, b) for p, q in zip(x["paths"], y["paths"])), default=0.0)
print(f"listed against whole-vocabulary steps: {same} of {len(a)} requests the same paths in order, scores within {worst:.1e}", file=sys.stderr)
PY
    fi
    python3 - "$work/gsr-$name-python.json" "$work/gsr-$name-trellis.json" "$name" "$batch" "$whole" <<'PY'
import json, os, sys
p = json.load(open(sys.argv[1]))
t = json.load(open(sys.argv[2]))
g = t["gsr"]["timings"]
# Trellis's time: answering the requests (linking, candidates, encoding, beam search,
# writing), without opening the store and loading the model, as Python's leaves out loading.
rust_dps = t["answered"] / t["seconds_answering"]
if sys.argv[5]:
    w = json.load(open(sys.argv[5]))
    whole_dps = w["answered"] / w["seconds_answering"]
    whole = f"{whole_dps:.2f} ({whole_dps / p['dialogs_per_s']:.1f}x)"
else:
    whole = "-"
print(f"| {sys.argv[3]} | {p['dialogs']} | {sys.argv[4]} | {p['dialogs_per_s']:.2f} | {rust_dps:.2f} | {rust_dps / p['dialogs_per_s']:.1f}x | {g['decoder_steps']} ({g['decoder_listed_steps']}) | {100 * t['gsr']['outside_onnx_runtime_share']:.1f}% | {os.getloadavg()[0]:.1f} | {whole} |")
PY
done
