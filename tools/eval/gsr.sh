#!/usr/bin/env bash
# The table of the trained retriever in docs/results-2026-11-25.md (the paper's Table 5 shape)
# on the OpenDialKG dev dialogs, beside the baselines, on the store every baseline is measured
# on (kg.tsv): GSR without the constraint, with the hard constraint, with the connection and the
# Katz prior, the prior's start recency off and at 16 and 32, alpha in {0.6, 0.8, 1.0}, both
# candidate scopes, two-step retrieval, and the model's log-softmax over the whole vocabulary
# (the paper's decoding) instead of over the allowed tokens. Rows take the model's trellis.json
# defaults for what they do not name.
#
#   BENCH_DIR=/tmp/bench MODEL=models/gsr-opendialkg bash tools/eval/gsr.sh [EXTRA ROWS...]
#
# EXTRA ROWS: `name|flags` (e.g. "float weights|--model DIR"). MAX_TURNS=N scores only the
# first N dev turns (quick checks; the published figures use all of them).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/eval/kg_gsr_store.sh
limit=()
[ -n "${MAX_TURNS:-}" ] && limit=(--max-turns "$MAX_TURNS")

rows=(
    "all|--retriever all"
    "random|--retriever random"
    "bm25|--retriever bm25"
    "katz|--retriever katz"
    "pcst (seed003)|--retriever pcst --pcst-variant seed003"
    "gsr, no constraint (w/o Const.)|--retriever gsr --model $model --prior none"
    "gsr, hard constraint|--retriever gsr --model $model --prior hard"
    "gsr, connection prior|--retriever gsr --model $model --prior connection"
    "gsr, katz prior (the model's defaults)|--retriever gsr --model $model --prior katz"
    "gsr, katz, no start recency (the paper's prior)|--retriever gsr --model $model --prior katz --start-recency 0"
    "gsr, katz, start recency 16|--retriever gsr --model $model --prior katz --start-recency 16"
    "gsr, katz, start recency 32|--retriever gsr --model $model --prior katz --start-recency 32"
    "gsr, katz prior, alpha 0.6|--retriever gsr --model $model --prior katz --alpha 0.6"
    "gsr, katz prior, alpha 0.8|--retriever gsr --model $model --prior katz --alpha 0.8"
    "gsr, katz prior, alpha 1.0|--retriever gsr --model $model --prior katz --alpha 1.0"
    "gsr, katz, uncapped scope|--retriever gsr --model $model --prior katz --scope uncapped"
    "gsr, katz, 2 steps|--retriever gsr --model $model --prior katz --steps 2"
    "gsr, katz, log-softmax over the vocabulary|--retriever gsr --model $model --prior katz --model-norm vocabulary"
    "gsr, katz, the paper's decoding (vocabulary, alpha 0.8, length penalty 1)|--retriever gsr --model $model --prior katz --model-norm vocabulary --alpha 0.8 --length-penalty 1"
    "$@"
)
echo "| retriever | path@1 | path@3 | path@5 | triple recall@1 | triple recall@5 | MRR | candidate recall | top path: gold start | top path: gold start + relation | turns/s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for r in "${rows[@]}"; do
    IFS='|' read -r name flags <<<"$r"
    # shellcheck disable=SC2086
    "$bin" eval retrieval --store "$store" --input "$data/opendialkg/dialogs_dev.csv" --k 1,3,5,10 \
        "${limit[@]}" $flags --json >"$work/eval-gsr.json"
    python3 - "$name" "$work/eval-gsr.json" <<'PY'
import json, sys
name, r = sys.argv[1], json.load(open(sys.argv[2]))
p, t = r["path_at"], r["triple_recall_at"]
print(f"| {name} | {p['1']:.4f} | {p['3']:.4f} | {p['5']:.4f} | {t['1']:.4f} | {t['5']:.4f} | {r['mrr']:.4f} "
      f"| {r['candidate_recall']:.4f} | {r['top_start_entity']:.4f} | {r['top_first_relation']:.4f} | {r['turns_per_s']:.1f} |")
PY
done
echo
echo "($(date -u +%F), $(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg); MAX_TURNS=${MAX_TURNS:-all})"
