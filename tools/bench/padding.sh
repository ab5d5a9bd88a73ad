#!/usr/bin/env bash
# Padding to the batch's longest input (rounded up to 8) against padding to input.max_tokens,
# side by side in one run (issue 37): gsr's path@1 and turns/s on all OpenDialKG dev actions
# (`trellis eval retrieval`, shipped decoding, --batch 8), and the chain's replies/s on 1 and 2
# workers over the first N dev turns (tools/bench/pipeline.sh). BEFORE is a binary built from
# a commit that pads to input.max_tokens (84d64db or earlier); the two alternate ROUNDS times.
# A build older than today's store format reads its own store and models: BEFORE_STORE (a
# store it loaded from kg.tsv and token-indexed) and BEFORE_MODELS (a folder holding that
# commit's gsr-opendialkg and generator-opendialkg, e.g. from `git archive`). The speed
# before padding was introduced (issue 37's 69-72 turns/s, 33 replies/s) is 6bc1998^:
#
#   BEFORE=/tmp/trellis-before [AFTER=path/to/trellis] [ROUNDS=2] [N=200] BENCH_DIR=/tmp/bench \
#       [BEFORE_STORE=DIR BEFORE_MODELS=DIR] bash tools/bench/padding.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/eval/kg_gsr_store.sh
after="${AFTER:-$bin}"
before="${BEFORE:?BEFORE=path to a trellis binary that pads to input.max_tokens}"
rounds="${ROUNDS:-2}"
echo "| build | round | path@1 | MRR | retrieve turns/s | replies/s, 1 worker | replies/s, 2 workers |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
    for name in before after; do
        b=$before s=${BEFORE_STORE:-$store} m=${BEFORE_MODELS:-models}
        [ "$name" = after ] && b=$after s=$store m=models
        "$b" eval retrieval --store "$s" --input "$data/opendialkg/dialogs_dev.csv" --k 1,3,5 --retriever gsr \
            --model "$m/gsr-opendialkg" --json >"$work/padding-$name-eval.json"
        replies=()
        for t in 1 2; do
            "$b" eval pipeline --store "$s" --input "$data/opendialkg/dialogs_dev.csv" --max-turns "${N:-200}" \
                --retriever gsr --model "$m/gsr-opendialkg" --generator "$m/generator-opendialkg" --threads "$t" --sessions "$t" \
                --model-threads 1 --json >"$work/padding-$name-pipeline-$t.json"
            replies+=("$(python3 -c 'import json, sys; print("%.2f" % json.load(open(sys.argv[1]))["replies_per_s"])' "$work/padding-$name-pipeline-$t.json")")
        done
        python3 - "$work/padding-$name-eval.json" "$name" "$round" "${replies[@]}" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['path_at']['1']:.4f} | {r['mrr']:.4f} | {r['turns_per_s']:.1f} | {sys.argv[4]} | {sys.argv[5]} |")
PY
    done
done
