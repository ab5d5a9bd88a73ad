#!/usr/bin/env bash
# The retrieval tables of docs/results-2026-11-25.md: every retriever on the OpenDialKG dev
# dialogs (all path actions, and the assistant's only) and on the MetaQA 1-hop dev questions,
# with the P/R/F1 figures quoted in the text. A few minutes on 2 cores.
#
#   BENCH_DIR=/tmp/bench bash tools/eval/retrieval.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/setup.sh
cargo build --release --locked --bins >&2
bin="$CARGO_TARGET_DIR/release"
data="${TRELLIS_SHARED_DATA:-../shared/data}"
work="${BENCH_DIR:-/tmp/trellis-bench}"
mkdir -p "$work"
[ -f "$work/kg/CURRENT" ] || "$bin/trellis" ingest --store "$work/kg" --on-error skip --rejects "$work/kg-rejects.tsv" "$data/opendialkg/kg.tsv" >&2
[ -f "$work/kb/CURRENT" ] || "$bin/trellis" ingest --store "$work/kb" "$data/metaqa/kb.txt" >&2

# name|flags
retrievers=(
    "all|--retriever all"
    "random|--retriever random"
    "bm25|--retriever bm25"
    "katz|--retriever katz"
    "pcst (seed003, gw)|--retriever pcst --pcst-variant seed003"
    "pcst (g-retriever, gw)|--retriever pcst --pcst-variant g-retriever"
)
# title|store|flags
sets=(
    "OpenDialKG dev, all path actions (default)|$work/kg|--input $data/opendialkg/dialogs_dev.csv --actions all"
    "OpenDialKG dev, assistant actions only|$work/kg|--input $data/opendialkg/dialogs_dev.csv --actions assistant"
    "MetaQA 1-hop dev|$work/kb|--dataset metaqa --input $data/metaqa/qa_1hop_dev.json"
)
for set in "${sets[@]}"; do
    IFS='|' read -r title store flags <<<"$set"
    echo
    echo "### $title"
    echo
    echo "| retriever | path@1 | path@3 | path@5 | triple recall@5 | triple recall@10 | MRR | Hits@1 | Hits@10 | mean size | p50 latency | P / R / F1 (top 10) |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    for r in "${retrievers[@]}"; do
        IFS='|' read -r name rflags <<<"$r"
        # shellcheck disable=SC2086
        "$bin/trellis" eval retrieval --store "$store" $flags $rflags --json >"$work/eval.json"
        python3 - "$name" "$work/eval.json" <<'PY'
import json, sys
name, r = sys.argv[1], json.load(open(sys.argv[2]))
p, t, h = r["path_at"], r["triple_recall_at"], r["hits_at"]
print(f"| `{name}` | {p['1']:.4f} | {p['3']:.4f} | {p['5']:.4f} | {t['5']:.4f} | {t['10']:.4f} | {r['mrr']:.4f} "
      f"| {h['1']:.4f} | {h['10']:.4f} | {r['mean_size']:.1f} | {r['latency_ms_p50']:.2f} ms "
      f"| {r['precision']:.4f} / {r['recall']:.4f} / {r['f1']:.4f} |")
PY
    done
    python3 - "$work/eval.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"\n{r['turns']} turns; {r['gold_not_in_store']} with a gold triple not in the store "
      f"({r['gold_unknown_name']} naming an entity or relation it lacks, {r['gold_empty_name']} with an empty name)")
PY
done
