#!/usr/bin/env bash
# The shipped models' activation quantization against earlier forms of the same weights,
# side by side in one run with one binary (issue 37): gsr's path@1, MRR and turns/s on all
# OpenDialKG dev actions (`trellis eval retrieval`, shipped decoding), the chain's replies/s
# on 1 and 2 workers over the first N dev turns, and whether each earlier form wrote the same
# ranked paths and replies as today's (`--turns` and `--predictions` files compared byte for
# byte). BEFORE lists commits whose models/gsr-opendialkg and models/generator-opendialkg are
# compared (default "6bc1998^ a2bf8fd": per-tensor dynamic scales, the last models before
# batches were padded; per-row scales, the last before the constant scales of
# tools/train/static_quant.py); the forms alternate ROUNDS times. Where forms differ in an
# answer the script says so; it does not fail.
#
#   [BEFORE="6bc1998^ a2bf8fd"] [ROUNDS=2] [N=200] BENCH_DIR=/tmp/bench bash tools/bench/quantize.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/eval/kg_gsr_store.sh
read -r -a commits <<<"${BEFORE:-6bc1998^ a2bf8fd}"
rounds="${ROUNDS:-2}"
names=()
for c in "${commits[@]}"; do
    name="at-$(git rev-parse --short "$c")"
    rm -rf "${work:?}/quantize-$name" && mkdir -p "$work/quantize-$name"
    git archive "$c" models/gsr-opendialkg models/generator-opendialkg | tar -x -C "$work/quantize-$name"
    names+=("$name")
done
names+=(now)
echo "| models | round | path@1 | MRR | retrieve turns/s | replies/s, 1 worker | replies/s, 2 workers |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
    for name in "${names[@]}"; do
        m=models
        [ "$name" != now ] && m="$work/quantize-$name/models"
        "$bin" eval retrieval --store "$store" --input "$data/opendialkg/dialogs_dev.csv" --k 1,3,5 --retriever gsr \
            --model "$m/gsr-opendialkg" --turns "$work/quantize-$name-turns.jsonl" --json >"$work/quantize-$name-eval.json"
        replies=()
        for t in 1 2; do
            "$bin" eval pipeline --store "$store" --input "$data/opendialkg/dialogs_dev.csv" --max-turns "${N:-200}" \
                --retriever gsr --model "$m/gsr-opendialkg" --generator "$m/generator-opendialkg" --threads "$t" --sessions "$t" \
                --model-threads 1 --predictions "$work/quantize-$name-replies-$t.jsonl" --json >"$work/quantize-$name-pipeline-$t.json"
            replies+=("$(python3 -c 'import json, sys; print("%.2f" % json.load(open(sys.argv[1]))["replies_per_s"])' "$work/quantize-$name-pipeline-$t.json")")
        done
        python3 - "$work/quantize-$name-eval.json" "$name" "$round" "${replies[@]}" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['path_at']['1']:.4f} | {r['mrr']:.4f} | {r['turns_per_s']:.1f} | {sys.argv[4]} | {sys.argv[5]} |")
PY
    done
    for name in "${names[@]}"; do
        [ "$name" = now ] && continue
        same=$(python3 -c 'import sys; a, b = (open(f).read().splitlines() for f in sys.argv[1:]); print(f"{sum(x == y for x, y in zip(a, b))} of {len(b)}")' \
            "$work/quantize-$name-turns.jsonl" "$work/quantize-now-turns.jsonl")
        replies=$(cmp -s "$work/quantize-$name-replies-1.jsonl" "$work/quantize-now-replies-1.jsonl" && echo all || echo "NOT all")
        echo "round $round: $name against now: the same ranked paths on $same turns; $replies replies the same (1 worker)" >&2
    done
done
