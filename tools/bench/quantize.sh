#!/usr/bin/env bash
# The shipped models' per-row activation quantization as one QuantizeLinear per activation
# (now) against the first version's Div, Round, Add, Clip and Cast (the models of commit
# BEFORE, default 7d120f1), side by side in one run with one binary (issue 37): gsr's path@1,
# MRR and turns/s on all OpenDialKG dev actions (`trellis eval retrieval`, shipped decoding),
# the chain's replies/s on 1 and 2 workers over the first N dev turns, and whether the two
# forms wrote the same ranked paths (`--turns` files compared byte for byte). The two
# alternate ROUNDS times. Where the two forms differ in an answer the script says so; it does
# not fail.
#
#   [BEFORE=7d120f1] [ROUNDS=2] [N=200] BENCH_DIR=/tmp/bench bash tools/bench/quantize.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/eval/kg_gsr_store.sh
before="${BEFORE:-7d120f1}"
rounds="${ROUNDS:-2}"
old="$work/quantize-before"
rm -rf "$old" && mkdir -p "$old"
git archive "$before" models/gsr-opendialkg models/generator-opendialkg | tar -x -C "$old"
echo "| models | round | path@1 | MRR | retrieve turns/s | replies/s, 1 worker | replies/s, 2 workers |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
    for name in before now; do
        m=models
        [ "$name" = before ] && m="$old/models"
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
    same=$(cmp -s "$work/quantize-before-turns.jsonl" "$work/quantize-now-turns.jsonl" && echo yes || echo NO)
    replies=$(cmp -s "$work/quantize-before-replies-1.jsonl" "$work/quantize-now-replies-1.jsonl" &&
        cmp -s "$work/quantize-before-replies-2.jsonl" "$work/quantize-now-replies-2.jsonl" && echo yes || echo NO)
    echo "round $round: the same ranked paths on every turn: $same; the same replies: $replies" >&2
done
