#!/usr/bin/env bash
# The shipped models' activation quantization against earlier forms of the same weights,
# side by side in one run with one binary (issue 37): gsr's path@1, MRR and turns/s on all
# OpenDialKG dev actions (`trellis eval retrieval`, shipped decoding), the chain's replies/s
# on 1 and 2 workers over the first N dev turns, and how many turns each earlier form ranks
# as today's (the same bytes, the same paths in order, the same first path: `--turns` files)
# and how many replies it words the same (`--predictions`, one worker). BEFORE lists commits whose models/gsr-opendialkg and models/generator-opendialkg are
# compared (default "6bc1998^ a2bf8fd": per-tensor dynamic scales, the last models before
# batches were padded; per-row scales, the last before the constant scales of
# tools/train/static_quant.py); DIRS adds folders holding the two models, as NAME=DIR (e.g.
# the shipped weights per tensor: tools/bench/per_tensor.py on each per-row model). The forms
# alternate ROUNDS times. Where forms differ in an answer the script says so; it does not fail.
#
#   [BEFORE="6bc1998^ a2bf8fd"] [DIRS="per-tensor=/tmp/pt"] [ROUNDS=2] [N=200] BENCH_DIR=/tmp/bench \
#       bash tools/bench/quantize.sh
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
declare -A dirs=()
read -r -a given <<<"${DIRS:-}"
for nd in "${given[@]}"; do
    name="${nd%%=*}"
    [[ "$nd" == *=* && "$name" =~ ^[A-Za-z0-9._-]+$ && "$name" != now && -z "${dirs[$name]:-}" ]] ||
        { echo "DIRS: '$nd': NAME=DIR with a name of letters, digits, . _ -, not 'now', each name once" >&2 && exit 2; }
    [ -d "${nd#*=}/gsr-opendialkg" ] && [ -d "${nd#*=}/generator-opendialkg" ] ||
        { echo "DIRS: $nd: no gsr-opendialkg and generator-opendialkg in ${nd#*=}" >&2 && exit 2; }
    dirs[$name]="${nd#*=}"
    names+=("$name")
done
names+=(now)
echo "| models | round | path@1 | MRR | retrieve turns/s | replies/s, 1 worker | replies/s, 2 workers |"
echo "|---|---|---|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
    for name in "${names[@]}"; do
        m=models
        if [ -n "${dirs[$name]:-}" ]; then
            m="${dirs[$name]}"
        elif [ "$name" != now ]; then
            m="$work/quantize-$name/models"
        fi
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
        python3 - "$work/quantize-$name-turns.jsonl" "$work/quantize-now-turns.jsonl" "$work/quantize-$name-replies-1.jsonl" \
            "$work/quantize-now-replies-1.jsonl" "$name" "$round" >&2 <<'PY'
import json, sys
a, b, ra, rb = ([json.loads(l) for l in open(f)] for f in sys.argv[1:5])
order = lambda t: [p["facts"] for p in t["paths"]]  # noqa: E731
same_bytes = sum(x == y for x, y in zip(a, b))
same_order = sum(order(x) == order(y) for x, y in zip(a, b))
same_first = sum(order(x)[:1] == order(y)[:1] for x, y in zip(a, b))
replies = sum(x.get("response") == y.get("response") for x, y in zip(ra, rb))
print(f"round {sys.argv[6]}: {sys.argv[5]} against now: of {len(b)} turns, {same_bytes} the same bytes, {same_order} the same ranked paths, "
      f"{same_first} the same first path; {replies} of {len(rb)} replies the same words (1 worker)")
PY
    done
done
