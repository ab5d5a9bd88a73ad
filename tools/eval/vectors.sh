#!/usr/bin/env bash
# Issue 36's dense speed: the store's vector index (`trellis index-vectors`) against embedding
# per turn. On the dev store (kg.tsv + kg_train_paths.tsv, as tools/eval/fact_table.sh makes
# it), for each bi-encoder of MODELS (default: the bundled one and the fine-tuned MiniLM):
# the vectors written (time, size), then `eval retrieval` on all dev path turns (MAX_TURNS to
# cut) for pcst (bm25 prizes), pcst with dense prizes (reading the vectors), dense with
# --dense-paths facts (reading them) and dense with --dense-paths text (embedding every
# candidate path per turn). One report per row in WORK (reused by a rerun: delete one to
# measure it again), then WORK/table.md. Then the speed side by side on the first SPEED_TURNS
# (default 400) path turns, one row after another: each stored-vector row again with the
# model's vector file moved aside (embedding per turn; the answers must be the same: the
# script compares the per-turn ranked paths) and with it back, into WORK/speed.md.
#
#   TRELLIS_BIN=BIN STORE=DIR bash tools/eval/vectors.sh [WORK]     # default /tmp/trellis-vectors
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${1:-/tmp/trellis-vectors}
store=${STORE:?the dev store (kg.tsv + kg_train_paths.tsv)}
data=${TRELLIS_SHARED_DATA:-../shared/data}/opendialkg
bin=${TRELLIS_BIN:-}
if [ -z "$bin" ]; then
    source tools/setup.sh
    cargo build --release --locked --bin trellis
    bin="$CARGO_TARGET_DIR/release/trellis"
fi
models=${MODELS:-"models/dense-opendialkg models/dense-minilm-opendialkg"}
threads=${MODEL_THREADS:-1}
turns=()
[ -n "${MAX_TURNS:-}" ] && turns=(--max-turns "$MAX_TURNS")
mkdir -p "$work"
row() {
    local name=$1; shift
    [ -s "$work/$name.json" ] && return 0
    echo "$(date +%T) $name" >&2
    "$bin" eval retrieval --store "$store" --input "$data/dialogs_dev.csv" "${turns[@]}" --json "$@" > "$work/$name.json.tmp"
    mv "$work/$name.json.tmp" "$work/$name.json"
}
row pcst --retriever pcst
for m in $models; do
    n=$(basename "$m")
    if [ ! -s "$work/index-$n.json" ]; then
        echo "$(date +%T) index-vectors $n" >&2
        start=$(date +%s.%N)
        "$bin" index-vectors --store "$store" --dense-model "$m" --model-threads "$threads" --json > "$work/index-$n.json.tmp"
        end=$(date +%s.%N)
        python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['seconds']=float(sys.argv[2])-float(sys.argv[3]); json.dump(d,open(sys.argv[4],'w'))" \
            "$work/index-$n.json.tmp" "$end" "$start" "$work/index-$n.json"
        rm "$work/index-$n.json.tmp"
    fi
    row "pcst-dense-$n" --retriever pcst --pcst-scores dense --dense-model "$m" --model-threads "$threads"
    row "dense-facts-$n" --retriever dense --dense-paths facts --dense-model "$m" --model-threads "$threads"
    # TEXT_TURNS cuts the slow per-turn rows (the table's turns column says so).
    row "dense-text-$n" --retriever dense --dense-paths text --dense-model "$m" --model-threads "$threads" ${TEXT_TURNS:+--max-turns "$TEXT_TURNS"}
done
speed_turns=${SPEED_TURNS:-400}
generation=$(cat "$store/CURRENT")
for m in $models; do
    n=$(basename "$m")
    file=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['path'])" "$work/index-$n.json")
    for kind in pcst-dense dense-facts; do
        case $kind in
            pcst-dense) flags=(--retriever pcst --pcst-scores dense) ;;
            dense-facts) flags=(--retriever dense --dense-paths facts) ;;
        esac
        for with in without with; do
            out="$work/speed-$kind-$n-$with"
            [ -s "$out.json" ] && continue
            echo "$(date +%T) speed $kind $n $with" >&2
            if [ "$with" = without ]; then mv "$file" "$file.aside"; fi
            "$bin" eval retrieval --store "$store" --input "$data/dialogs_dev.csv" --max-turns "$speed_turns" --json \
                --turns "$out.turns.jsonl" "${flags[@]}" --dense-model "$m" --model-threads "$threads" > "$out.json.tmp" || true
            if [ "$with" = without ]; then mv "$file.aside" "$file"; fi
            mv "$out.json.tmp" "$out.json"
        done
        cmp -s "$work/speed-$kind-$n-without.turns.jsonl" "$work/speed-$kind-$n-with.turns.jsonl" \
            && echo "same" > "$work/speed-$kind-$n.same" || echo "DIFFERENT" > "$work/speed-$kind-$n.same"
    done
done
[ "$(cat "$store/CURRENT")" = "$generation" ] || echo "warning: the store moved on during the run" >&2

python3 - "$work" $models <<'PY'
import json, os, sys
work, models = sys.argv[1], sys.argv[2:]
rows = [("pcst (bm25 prizes)", "pcst")]
for m in models:
    n = os.path.basename(m)
    rows += [(f"pcst, dense prizes ({n}, stored vectors)", f"pcst-dense-{n}"),
             (f"dense, facts ({n}, stored vectors)", f"dense-facts-{n}"),
             (f"dense, whole path text ({n}, per turn)", f"dense-text-{n}")]
out = ["| retriever | turns | path@1 | path@3 | path@5 | path@10 | MRR | triple recall@5 | turns/s | p50 ms |", "|---|---|---|---|---|---|---|---|---|---|"]
for label, key in rows:
    p = os.path.join(work, key + ".json")
    if not os.path.exists(p):
        continue
    d = json.load(open(p)); pa = d["path_at"]
    out.append(f"| {label} | {d['turns']} | {pa['1']:.4f} | {pa['3']:.4f} | {pa['5']:.4f} | {pa['10']:.4f} | {d['mrr']:.4f} | {d['triple_recall_at']['5']:.4f} | {d['turns_per_s']:.1f} | {d['latency_ms_p50']:.1f} |")
out += ["", "| vectors | entities | facts | dims | MB | seconds |", "|---|---|---|---|---|---|"]
for m in models:
    n = os.path.basename(m)
    p = os.path.join(work, f"index-{n}.json")
    if os.path.exists(p):
        d = json.load(open(p)); h = d["header"]
        out.append(f"| {n} | {h['entities']} | {h['facts']} | {h['dims']} | {d['bytes']/1e6:.1f} | {d['seconds']:.0f} |")
open(os.path.join(work, "table.md"), "w").write("\n".join(out) + "\n")
print("\n".join(out))
speed = ["| row | turns | without the file: turns/s | p50 ms | with it: turns/s | p50 ms | speed-up | same ranked paths |", "|---|---|---|---|---|---|---|---|"]
for m in models:
    n = os.path.basename(m)
    for kind in ("pcst-dense", "dense-facts"):
        a, b = (os.path.join(work, f"speed-{kind}-{n}-{w}.json") for w in ("without", "with"))
        if not (os.path.exists(a) and os.path.exists(b)):
            continue
        a, b = json.load(open(a)), json.load(open(b))
        same = open(os.path.join(work, f"speed-{kind}-{n}.same")).read().strip()
        speed.append(f"| {kind}, {n} | {b['turns']} | {a['turns_per_s']:.1f} | {a['latency_ms_p50']:.1f} | {b['turns_per_s']:.1f} | {b['latency_ms_p50']:.1f} | {b['turns_per_s']/a['turns_per_s']:.1f}x | {same} |")
open(os.path.join(work, "speed.md"), "w").write("\n".join(speed) + "\n")
print("\n".join(speed))
PY
