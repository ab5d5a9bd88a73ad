#!/usr/bin/env bash
# Scores every saved epoch of a generator run by its dev replies, the way the shipped chain
# writes them, so the epoch shipped is chosen by what users read rather than by the token
# loss (docs/results-2026-11-26.md: a lower dev loss gave lower reply F1):
#
#   STORE=DIR bash tools/train/select_generator.sh RUN_DIR [MODEL_DIR...]
#
# For each RUN_DIR/generator/epoch-N/hf (and each MODEL_DIR given, an exported generator to
# compare with, e.g. the shipped one): exported int8 as it would ship (export.py --quantize
# --calibration RUN_DIR/gen-train-targets.jsonl, once, into epoch-N/model), then `trellis eval pipeline` on the first TURNS (default 1000)
# assistant replies of the dev dialogs with their gold path (`--knowledge gold`: the
# generator's own share of the chain, no retriever in it) on STORE (a store of kg.tsv, e.g.
# tools/eval/kg_gsr_store.sh's). Each report is kept beside the model (reply-TURNS.json);
# the table goes to stdout and RUN_DIR/generator/replies-TURNS.md, best F1 first.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
run=${1:?usage: STORE=DIR bash tools/train/select_generator.sh RUN_DIR [MODEL_DIR...]}
shift
: "${STORE:?STORE=DIR: a store of the OpenDialKG kg.tsv}"
TURNS=${TURNS:-1000}
data=${TRELLIS_SHARED_DATA:-$root/../shared/data}/opendialkg
PY=$(bash tools/venv.sh train)
source tools/setup.sh
cargo build --release --locked --bin trellis
bin="$CARGO_TARGET_DIR/release/trellis"
tok="$run/gen-tokenizer.json"
models=()
for hf in "$run"/generator/epoch-*/hf; do
    [ -d "$hf" ] || continue
    dir="$(dirname "$hf")/model"
    # An export from before constant activation scales (no static_quant.json) is made again.
    if [ ! -f "$dir/trellis.json" ] || [ ! -f "$dir/static_quant.json" ]; then
        echo "select_generator.sh: exporting $hf" >&2
        "$PY" tools/train/export.py --hf "$hf" --tokenizer "$tok" --trellis-json tools/train/generator.json --out "$dir.part" --quantize \
            --calibration "$run/gen-train-targets.jsonl" >&2
        rm -rf "$dir" && mv "$dir.part" "$dir"
    fi
    models+=("$dir")
done
models+=("$@")
reports=()
for dir in "${models[@]}"; do
    report="$dir/reply-$TURNS.json"
    if [ ! -f "$report" ]; then
        "$bin" eval pipeline --store "$STORE" --input "$data/dialogs_dev.csv" --actions assistant --generator "$dir" \
            --knowledge gold --retriever all --max-turns "$TURNS" --json >"$report.part"
        mv "$report.part" "$report"
    fi
    reports+=("$report")
done
python3 - "$run/generator/replies-$TURNS.md" "${reports[@]}" <<'PY'
import json, sys
out, reports = sys.argv[1], sys.argv[2:]
rows = []
for path in reports:
    r = json.load(open(path))
    s = r["responses"]
    g = s.get("grounding") or {}
    rows.append((s["f1"], path.rsplit("/", 1)[0], s["bleu_dialoggsr"]["1"], s["rouge"]["rougeL"], s["kf1"], g.get("mention_rate"), s["distinct_replies"], s["pairs"]))
rows.sort(key=lambda r: -r[0])
lines = ["| model | F1 | BLEU-1 (authors') | ROUGE-L | KF1 | names an entity | distinct replies |", "|---|---|---|---|---|---|---|"]
for f1, name, b1, rl, kf1, m, d, n in rows:
    lines.append(f"| {name} | {f1:.4f} | {b1:.4f} | {rl:.4f} | {kf1:.4f} | {m:.4f} | {d} of {n} |")
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print(text, end="")
PY
