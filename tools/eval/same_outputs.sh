#!/usr/bin/env bash
# Runs retrieve (gsr, pcst, surge: every dev turn; surge + gsr + pcst reranked: the first
# 1,000), eval retrieval (gsr, 1,500 turns) and eval pipeline (400 assistant turns) with two
# trellis binaries and compares the outputs byte for byte (the reports after dropping their
# timing fields): a refactor must not change an answer.
#   STORE=/tmp/bench/kg-gsr REQ=/tmp/bench/dev-req.jsonl bash tools/eval/same_outputs.sh OLD_BIN NEW_BIN
# STORE: the kg.tsv store with the shipped retriever's token index (tools/eval/kg_gsr_store.sh);
# REQ: the dev turns as requests (tools/data/opendialkg_requests.py).
set -u
OLD=$1; NEW=$2; OUT=${OUT:-/tmp/same-outputs}; mkdir -p "$OUT"
export ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-$HOME/.cache/trellis/onnxruntime/libonnxruntime.so.1.31.1}
cd "$(dirname "$0")/../.."
DEV=${TRELLIS_SHARED_DATA:-../shared/data}/opendialkg/dialogs_dev.csv; STORE=${STORE:-/tmp/bench/kg-gsr}; REQ=${REQ:-/tmp/bench/dev-req.jsonl}
for tag in old new; do
  BIN=$OLD; [ $tag = new ] && BIN=$NEW
  $BIN retrieve --store $STORE --retriever gsr --model models/gsr-opendialkg --input $REQ --output $OUT/retrieve-gsr-$tag.jsonl --top 5 2>$OUT/retrieve-gsr-$tag.err
  $BIN retrieve --store $STORE --retriever pcst --input $REQ --output $OUT/retrieve-pcst-$tag.jsonl --top 5 2>$OUT/retrieve-pcst-$tag.err
  $BIN retrieve --store $STORE --retriever surge --surge-model models/surge-opendialkg --input $REQ --output $OUT/retrieve-surge-$tag.jsonl --top 5 2>$OUT/retrieve-surge-$tag.err
  head -1000 $REQ > $OUT/req-1000.jsonl
  $BIN retrieve --store $STORE --retriever surge --surge-model models/surge-opendialkg --model models/gsr-opendialkg --rerank models/rerank-opendialkg --rerank-pool gsr,pcst --input $OUT/req-1000.jsonl --output $OUT/retrieve-reranked-$tag.jsonl --top 5 2>$OUT/retrieve-reranked-$tag.err
  $BIN eval retrieval --store $STORE --input $DEV --retriever gsr --model models/gsr-opendialkg --max-turns 1500 --json > $OUT/evalret-$tag.json 2>$OUT/evalret-$tag.err
  $BIN eval pipeline --store $STORE --input $DEV --actions assistant --retriever gsr --model models/gsr-opendialkg --generator models/generator-opendialkg --max-turns 400 --json --predictions $OUT/pred-$tag.jsonl > $OUT/evalpipe-$tag.json 2>$OUT/evalpipe-$tag.err
done
strip() { python3 -c '
import json,sys
def s(x):
    if isinstance(x,dict): return {k:s(v) for k,v in x.items() if not any(t in k for t in ("per_s","_ms","timings","seconds","elapsed"))}
    if isinstance(x,list): return [s(v) for v in x]
    return x
print(json.dumps(s(json.load(open(sys.argv[1]))),sort_keys=True,indent=1))' "$1"; }
for f in retrieve-gsr retrieve-pcst retrieve-surge retrieve-reranked; do cmp $OUT/$f-old.jsonl $OUT/$f-new.jsonl && echo "$f: identical ($(wc -l < $OUT/$f-new.jsonl) lines)"; done
cmp $OUT/pred-old.jsonl $OUT/pred-new.jsonl && echo "eval pipeline predictions: identical ($(wc -l < $OUT/pred-new.jsonl) lines)"
for f in evalret evalpipe; do diff <(strip $OUT/$f-old.json) <(strip $OUT/$f-new.json) > $OUT/$f.diff && echo "$f: identical after dropping timings"; done
