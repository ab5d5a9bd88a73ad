#!/usr/bin/env bash
# The response table of docs/results-2026-11-26.md (the papers' shape, with the DialogGSR
# authors' BLEU and the grounding figures beside): the shipped generator on
# the OpenDialKG dev dialogs' assistant replies with no knowledge, the gold path, and the paths
# retrieved by bm25, pcst and gsr (the shipped retriever), with the time of each stage, on the
# kg.tsv store.
#
#   BENCH_DIR=/tmp/bench bash tools/eval/pipeline.sh
#
# MAX_TURNS=N scores only the first N actions (quick checks; the published table uses all of them).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/eval/kg_gsr_store.sh
generator="${GENERATOR:-models/generator-opendialkg}"
limit=()
[ -n "${MAX_TURNS:-}" ] && limit=(--max-turns "$MAX_TURNS")
rows=(
    "no knowledge|--knowledge none --retriever all"
    "gold path|--knowledge gold --retriever all"
    "bm25, top 3|--retriever bm25"
    "pcst, top 3|--retriever pcst"
    "gsr (shipped retriever), top 3|--retriever gsr --model $model"
)
echo "| knowledge | BLEU-1 | BLEU-2 | BLEU-3 | BLEU-4 | BLEU-1 (authors') | BLEU-4 (authors') | ROUGE-L | F1 | KF1 | names an entity | entity recall | distinct replies | path@1 | link ms | retrieve ms | generate ms | replies/s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for r in "${rows[@]}"; do
    IFS='|' read -r name flags <<<"$r"
    # shellcheck disable=SC2086
    "$bin" eval pipeline --store "$store" --input "$data/opendialkg/dialogs_dev.csv" --actions assistant \
        --generator "$generator" "${limit[@]}" $flags --json >"$work/eval-pipeline.json"
    python3 - "$name" "$work/eval-pipeline.json" <<'PY'
import json, sys
name, r = sys.argv[1], json.load(open(sys.argv[2]))
s, t = r["responses"], r["timings"]
b = s["bleu_sacrebleu"]
kf1 = "-" if s["kf1"] is None else f"{s['kf1']:.4f}"
p1 = "-" if r["retrieval"] is None else f"{r['retrieval']['path_at_1']:.4f}"
a = s["bleu_dialoggsr"]
g = s.get("grounding") or {}
fmt = lambda x: "-" if x is None else f"{x:.4f}"
print(f"| {name} | {b['1']:.4f} | {b['2']:.4f} | {b['3']:.4f} | {b['4']:.4f} | {a['1']:.4f} | {a['4']:.4f} | {s['rouge']['rougeL']:.4f} | {s['f1']:.4f} | {kf1} "
      f"| {fmt(g.get('mention_rate'))} | {fmt(g.get('entity_recall'))} | {s['distinct_replies']} of {s['pairs']} | {p1} "
      f"| {t['link_ms']:.2f} | {t['retrieve_ms']:.2f} | {t['generate_ms']:.2f} | {r['replies_per_s']:.1f} |")
PY
done
