#!/usr/bin/env bash
# The table of issue 23 in the results docs: the encoder-based retrievers (dense, surge, PCST
# with dense prizes, reranked gsr, gsr + pcst, surge + gsr and surge + gsr + pcst, fused and
# by the cross-encoder alone) beside bm25, pcst and gsr, on every path action of the
# OpenDialKG dev dialogs (4,214 turns), with the shipped models:
#
#   BENCH_DIR=/tmp/bench bash tools/eval/encoders.sh
#
# Each row's `trellis eval retrieval --json` report is kept in BENCH_DIR/encoders-NAME.json
# and reused by a rerun (delete it to measure again); a reranked row run afresh also keeps
# its turns (`--turns`: each turn's pooled paths) in encoders-NAME.turns.jsonl, which
# tools/eval/fusion.py reads (the other rows' would be hundreds of paths a turn). MAX_TURNS=N scores the first N turns only
# (into encoders-N-NAME.json). turns/s is each row's own run: compare them only from one run on
# an otherwise idle machine (tools/bench/rerank.sh measures the rerank cost side by side).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/eval/kg_gsr_store.sh
dense=models/dense-opendialkg
rerank=models/rerank-opendialkg
surge=models/surge-opendialkg
threads=${MODEL_THREADS:-0}
limit=()
tag=""
if [ -n "${MAX_TURNS:-}" ]; then limit=(--max-turns "$MAX_TURNS"); tag="$MAX_TURNS-"; fi
# The reranked rows fuse the cross-encoder's score with the pooled retrievers' reciprocal
# ranks (--rerank-fusion, default 1); the "cross-encoder alone" rows order by its score only.
rows=(
    "bm25|--retriever bm25"
    "pcst|--retriever pcst"
    "gsr (shipped)|--retriever gsr --model $model"
    "surge|--retriever surge --surge-model $surge"
    "dense|--retriever dense --dense-model $dense"
    "pcst, dense prizes|--retriever pcst --pcst-scores dense --dense-model $dense"
    "gsr, reranked (top 20)|--retriever gsr --model $model --rerank $rerank --rerank-top 20"
    "gsr + pcst, reranked (top 20 each)|--retriever gsr --model $model --rerank $rerank --rerank-pool pcst --rerank-top 20"
    "surge + gsr, reranked (top 20 each)|--retriever surge --surge-model $surge --model $model --rerank $rerank --rerank-pool gsr --rerank-top 20"
    "surge + gsr + pcst, reranked (top 20 each)|--retriever surge --surge-model $surge --model $model --rerank $rerank --rerank-pool gsr,pcst --rerank-top 20"
    "gsr, cross-encoder alone (top 20)|--retriever gsr --model $model --rerank $rerank --rerank-top 20 --rerank-fusion 0"
    "gsr + pcst, cross-encoder alone (top 20 each)|--retriever gsr --model $model --rerank $rerank --rerank-pool pcst --rerank-top 20 --rerank-fusion 0"
    "surge + gsr, cross-encoder alone (top 20 each)|--retriever surge --surge-model $surge --model $model --rerank $rerank --rerank-pool gsr --rerank-top 20 --rerank-fusion 0"
)
echo "| retriever | turns | path@1 | path@3 | path@5 | triple recall@5 | MRR | turns/s |"
echo "|---|---|---|---|---|---|---|---|"
for r in "${rows[@]}"; do
    IFS='|' read -r name flags <<<"$r"
    file="$work/encoders-$tag$(echo "$name" | tr -c 'a-z0-9\n' '-' | tr -s '-').json"
    if [ ! -s "$file" ]; then
        turns=()
        case "$flags" in *--rerank\ *) turns=(--turns "${file%.json}.turns.jsonl") ;; esac
        # --model-threads only where a model runs: the library refuses it for the others.
        mt=()
        case "$flags" in *--model\ * | *--dense-model* | *--surge-model* | *--rerank\ *) mt=(--model-threads "$threads") ;; esac
        # shellcheck disable=SC2086
        "$bin" eval retrieval --store "$store" --input "$data/opendialkg/dialogs_dev.csv" --actions all "${mt[@]}" \
            "${limit[@]}" $flags --json "${turns[@]}" >"$file.part"
        mv "$file.part" "$file"
    fi
    python3 - "$name" "$file" <<'PY'
import json, sys
name, r = sys.argv[1], json.load(open(sys.argv[2]))
r = r[0] if isinstance(r, list) else r
p, t = r["path_at"], r["triple_recall_at"]
print(f"| {name} | {r['turns']} | {p['1']:.4f} | {p['3']:.4f} | {p['5']:.4f} | {t['5']:.4f} | {r['mrr']:.4f} | {r['turns_per_s']:.1f} |")
PY
done
