#!/usr/bin/env bash
# Issue 36's dense speed: the store's vector index (`trellis index-vectors`) against embedding
# per turn. On the dev store (kg.tsv + kg_train_paths.tsv, as tools/eval/fact_table.sh makes
# it), for each bi-encoder of MODELS (default: the bundled one and the fine-tuned MiniLM):
# the vectors written (time, size), then `eval retrieval` on all dev path turns (MAX_TURNS to
# cut) for pcst (bm25 prizes), pcst with dense prizes (reading the vectors), dense with
# --dense-paths facts (reading them) and dense with --dense-paths text (embedding every
# candidate path per turn). One report per row in WORK (reused by a rerun: delete one to
# measure it again), then WORK/table.md.
#
#   TRELLIS_BIN=BIN STORE=DIR bash tools/eval/vectors.sh [WORK]     # default /tmp/trellis-vectors
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${1:-/tmp/trellis-vectors}
store=${STORE:?the dev store (kg.tsv + kg_train_paths.tsv)}
data=${TRELLIS_SHARED_DATA:-../shared/data}/opendialkg
bin=${TRELLIS_BIN:-}
if [ -z "$bin" ]; then
    source tools/setup.sh
    cargo build --release --locked --bin trellis
    bin="$CARGO_TARGET_DIR/release/trellis"
fi
models=${MODELS:-"models/dense-opendialkg models/dense-minilm-opendialkg"}
threads=${MODEL_THREADS:-1}
turns=()
[ -n "${MAX_TURNS:-}" ] && turns=(--max-turns "$MAX_TURNS")
mkdir -p "$work"
row() {
    local name=$1; shift
    [ -s "$work/$name.json" ] && return 0
    echo "$(date +%T) $name" >&2
    "$bin" eval retrieval --store "$store" --input "$data/dialogs_dev.csv" "${turns[@]}" --json "$@" > "$work/$name.json.tmp"
    mv "$work/$name.json.tmp" "$work/$name.json"
}
row pcst --retriever pcst
for m in $models; do
    n=$(basename "$m")
    if [ ! -s "$work/index-$n.json" ]; then
        echo "$(date +%T) index-vectors $n" >&2
        start=$(date +%s.%N)
        "$bin" index-vectors --store "$store" --dense-model "$m" --model-threads "$threads" --json > "$work/index-$n.json.tmp"
        end=$(date +%s.%N)
        python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['seconds']=float(sys.argv[2])-float(sys.argv[3]); json.dump(d,open(sys.argv[4],'w'))" \
            "$work/index-$n.json.tmp" "$end" "$start" "$work/index-$n.json"
        rm "$work/index-$n.json.tmp"
    fi
    row "pcst-dense-$n" --retriever pcst --pcst-scores dense --dense-model "$m" --model-threads "$threads"
    row "dense-facts-$n" --retriever dense --dense-paths facts --dense-model "$m" --model-threads "$threads"
    row "dense-text-$n" --retriever dense --dense-paths text --dense-model "$m" --model-threads "$threads"
done
python3 - "$work" $models <<'PY'
import json, os, sys
work, models = sys.argv[1], sys.argv[2:]
rows = [("pcst (bm25 prizes)", "pcst")]
for m in models:
    n = os.path.basename(m)
    rows += [(f"pcst, dense prizes ({n}, stored vectors)", f"pcst-dense-{n}"),
             (f"dense, facts ({n}, stored vectors)", f"dense-facts-{n}"),
             (f"dense, whole path text ({n}, per turn)", f"dense-text-{n}")]
out = ["| retriever | turns | path@1 | path@3 | path@5 | path@10 | MRR | triple recall@5 | turns/s | p50 ms |", "|---|---|---|---|---|---|---|---|---|---|"]
for label, key in rows:
    p = os.path.join(work, key + ".json")
    if not os.path.exists(p):
        continue
    d = json.load(open(p)); pa = d["path_at"]
    out.append(f"| {label} | {d['turns']} | {pa['1']:.4f} | {pa['3']:.4f} | {pa['5']:.4f} | {pa['10']:.4f} | {d['mrr']:.4f} | {d['triple_recall_at']['5']:.4f} | {d['turns_per_s']:.1f} | {d['latency_ms_p50']:.1f} |")
out += ["", "| vectors | entities | facts | dims | MB | seconds |", "|---|---|---|---|---|---|"]
for m in models:
    n = os.path.basename(m)
    p = os.path.join(work, f"index-{n}.json")
    if os.path.exists(p):
        d = json.load(open(p)); h = d["header"]
        out.append(f"| {n} | {h['entities']} | {h['facts']} | {h['dims']} | {d['bytes']/1e6:.1f} | {d['seconds']:.0f} |")
open(os.path.join(work, "table.md"), "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
