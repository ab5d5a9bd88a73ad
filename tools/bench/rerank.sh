#!/usr/bin/env bash
# What reranking costs (issue 23: reranking the top 20 at most halves gsr's turns/s): gsr
# alone, gsr reranked (top 20), gsr + pcst and surge + gsr + pcst reranked (top 20 each), and
# dense and surge for scale, on the first TURNS (default 400) OpenDialKG dev turns, in one run, each measured
# ROUNDS times (default 2) in turn (A B C A B C ...) so drift hits them alike; the best of
# each row's rounds is reported, with the cost relative to gsr alone.
#
#   BENCH_DIR=/tmp/bench bash tools/bench/rerank.sh
#
# Stop background work first: timings on this 2-core machine move up to 2x with load.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/eval/kg_gsr_store.sh
TURNS=${TURNS:-400}
ROUNDS=${ROUNDS:-2}
threads=${MODEL_THREADS:-0}
rerank=models/rerank-opendialkg
rows=(
    "gsr alone|--retriever gsr --model $model"
    "gsr, reranked (top 20)|--retriever gsr --model $model --rerank $rerank --rerank-top 20"
    "gsr + pcst, reranked (top 20 each)|--retriever gsr --model $model --rerank $rerank --rerank-pool pcst --rerank-top 20"
    "surge + gsr + pcst, reranked (top 20 each)|--retriever surge --surge-model models/surge-opendialkg --model $model --rerank $rerank --rerank-pool gsr,pcst --rerank-top 20"
    "dense|--retriever dense --dense-model models/dense-opendialkg"
    "surge|--retriever surge --surge-model models/surge-opendialkg"
)
out="$work/rerank-bench.tsv"
: >"$out"
for round in $(seq "$ROUNDS"); do
    for r in "${rows[@]}"; do
        IFS='|' read -r name flags <<<"$r"
        # --model-threads only where a model runs: the library refuses it for the others.
        mt=()
        case "$flags" in *--model\ * | *--dense-model* | *--surge-model* | *--rerank\ *) mt=(--model-threads "$threads") ;; esac
        # shellcheck disable=SC2086
        "$bin" eval retrieval --store "$store" --input "$data/opendialkg/dialogs_dev.csv" --actions all --max-turns "$TURNS" \
            "${mt[@]}" $flags --json >"$work/rerank-bench.json"
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r=r[0] if isinstance(r,list) else r; print(sys.argv[2], sys.argv[3], r["turns_per_s"], r["path_at"]["1"], sep="\t")' \
            "$work/rerank-bench.json" "$round" "$name" >>"$out"
    done
done
python3 - "$out" "$TURNS" "$ROUNDS" <<'PY'
import sys
rows = {}
order = []
for line in open(sys.argv[1]):
    _, name, tps, p1 = line.rstrip("\n").split("\t")
    if name not in rows:
        order.append(name)
    rows.setdefault(name, []).append((float(tps), float(p1)))
base = max(t for t, _ in rows["gsr alone"])
print(f"{sys.argv[2]} dev turns, best of {sys.argv[3]} rounds\n")
print("| retriever | turns/s (each round) | best | against gsr alone | path@1 |")
print("|---|---|---|---|---|")
for name in order:
    ts = [t for t, _ in rows[name]]
    print(f"| {name} | {', '.join(f'{t:.1f}' for t in ts)} | {max(ts):.1f} | {base / max(ts):.2f}x the time | {rows[name][0][1]:.4f} |")
PY
