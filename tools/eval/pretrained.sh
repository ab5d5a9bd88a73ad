#!/usr/bin/env bash
# Issue 36's zero-shot rows: the pretrained all-MiniLM-L6-v2 exported as a user would
# (tools/train/pretrained.py export: optimum's float feature-extraction export, its
# sentence-transformers files, trellis.json {"format": 1, "task": "dense", "dense": {"turns": 3}})
# as `--retriever dense` and as PCST's dense prizes, beside the bundled bi-encoder and pcst, on
# the first MAX_TURNS (default 400) path turns of the OpenDialKG dev dialogs:
#
#   TRELLIS_BIN=BIN ORT_DYLIB_PATH=LIB bash tools/eval/pretrained.sh [WORK]   # default /tmp/trellis-pretrained
#
# Without TRELLIS_BIN the release binary is built (tools/setup.sh). WORK holds the dev store
# (kg.tsv, as tools/train/encoders.sh makes it), the extracted model (WORK/st, or ST=DIR), its
# export (WORK/zero-shot, or ZS=DIR), each row's `eval retrieval --json` report (reused by a
# rerun: delete one to measure it again) and table.md. MODEL_THREADS (default 1) is the
# engine's --model-threads; turns/s is measured as the machine stood (compare rows of one run).
# Extra rows: ROWS="NAME|FLAGS;NAME|FLAGS" (for instance a fine-tuned model).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
work=${1:-/tmp/trellis-pretrained}
data=${TRELLIS_SHARED_DATA:-$root/../shared/data}/opendialkg
max_turns=${MAX_TURNS:-400}
threads=${MODEL_THREADS:-1}
mkdir -p "$work"
if [ -n "${TRELLIS_BIN:-}" ]; then
    bin=$TRELLIS_BIN
else
    source tools/setup.sh
    cargo build --release --locked --bin trellis
    bin="$CARGO_TARGET_DIR/release/trellis"
fi
PY=${PY:-$(bash tools/venv.sh encoders)}
st=${ST:-$work/st}
zs=${ZS:-$work/zero-shot}
[ -f "$st/provenance.json" ] || "$PY" tools/train/pretrained.py extract --out "$st"
[ -f "$zs/trellis.json" ] || "$PY" tools/train/pretrained.py export --st "$st" --out "$zs"
"$PY" tools/train/pretrained.py compare --st "$st" --model "$zs"
"$bin" doctor --model "$zs"
store=$work/store-dev
if [ ! -f "$store/.loaded" ]; then
    rm -rf "$store"
    "$bin" ingest --store "$store" --on-error skip --rejects "$store.rejects.tsv" "$data/kg.tsv"
    touch "$store/.loaded"
fi
rows=(
    "pcst|--retriever pcst"
    "dense, bundled (models/dense-opendialkg)|--retriever dense --dense-model $root/models/dense-opendialkg"
    "dense, all-MiniLM-L6-v2 zero-shot (float)|--retriever dense --dense-model $zs"
    "pcst, dense prizes (all-MiniLM-L6-v2 zero-shot)|--retriever pcst --pcst-scores dense --dense-model $zs"
)
if [ -n "${ROWS:-}" ]; then IFS=';' read -r -a more <<<"$ROWS"; rows+=("${more[@]}"); fi
table=$work/table.md
{
    echo "First $max_turns path turns of dialogs_dev.csv (--actions all), --model-threads $threads, $(date -u +%F)."
    echo
    echo "| retriever | turns | path@1 | path@3 | path@5 | MRR | turns/s |"
    echo "|---|---|---|---|---|---|---|"
} >"$table"
for r in "${rows[@]}"; do
    IFS='|' read -r name flags <<<"$r"
    file="$work/$max_turns-$(echo "$name" | tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' '-' | tr -s '-').json"
    if [ ! -s "$file" ]; then
        # shellcheck disable=SC2086
        # --model-threads only where a model runs (the engine refuses it for plain pcst).
        mt=()
        case "$flags" in *--dense-model*) mt=(--model-threads "$threads") ;; esac
        "$bin" eval retrieval --store "$store" --input "$data/dialogs_dev.csv" --max-turns "$max_turns" "${mt[@]}" \
            $flags --json >"$file.part"
        mv "$file.part" "$file"
    fi
    python3 - "$name" "$file" >>"$table" <<'PY'
import json, sys
name, r = sys.argv[1], json.load(open(sys.argv[2]))
r = r[0] if isinstance(r, list) else r
p = r["path_at"]
print(f"| {name} | {r['turns']} | {p['1']:.4f} | {p['3']:.4f} | {p['5']:.4f} | {r['mrr']:.4f} | {r['turns_per_s']:.2f} |")
PY
done
cat "$table"
