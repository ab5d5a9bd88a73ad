#!/usr/bin/env bash
# Freebase scale end to end (issue 37): OpenDialKG's graph loaded together with a synthetic
# power-law graph of FACTS generated lines (default 2.3B: a power law repeats hub facts, and
# 1.9B lines gave 1.62B distinct facts, so 2.3B are needed for Freebase's 1.9B), then
# retrieval on the dev dialogs over it beside the OpenDialKG store alone, in one run.
#
#   BENCH_DIR=/tmp/bench VARIANT=a|b bash tools/bench/freebase_scale.sh load
#   BENCH_DIR=/tmp/bench VARIANT=a|b bash tools/bench/freebase_scale.sh retrieve
#   BENCH_DIR=/tmp/bench bash tools/bench/freebase_scale.sh attach    # b from a, by an update
#
# VARIANT a: the synthetic part is disconnected from OpenDialKG's entities (its keys are
# `entity N`, its relations `relation N`), so every answer must equal the small store's.
# VARIANT b: OpenDialKG's entity keys take the places of synthetic entities drawn at random
# (trellis-gen-powerlaw --attach), so they get synthetic neighbours in the graph's own degree
# distribution: a few become hubs, and the candidate caps must hold.
#
# attach: variant b made from variant a's store by one `trellis update` instead of a second
# load (the disk holds one such store): the facts of the synthetic entities whose places
# OpenDialKG's keys take (`--attach KEYS --only-attached`) are added with those keys, and the
# store is renamed fb-b. Its `entity N` copies of those neighbourhoods stay, disconnected.
#
# load: the generator writes straight into `trellis ingest -` (no TSV on disk: 1.9B lines
# would take about 50 GB); peak RSS by /usr/bin/time against MEMORY_MB (default 6144), disk
# used sampled every 5 s (the sorted runs of both orders beside the tables are the peak), then
# the gsr token index (INDEX_TOKENS=0 skips it). 1.9B lines made a 25 GB store and needed
# 57.5 GB of disk at the load's peak with runs of 12 bytes a fact (48 minutes on 2 cores);
# runs are delta-coded since; `rm -rf $BENCH_DIR/fb-a` frees it.
#
# BIN and GEN: frozen copies of the two binaries (the runs take hours; a build of the working
# tree meanwhile would change them).
#
# retrieve: `trellis eval retrieval` on the dev dialogs, each row on the small store then the
# big one (gsr, surge, pcst on TURNS turns, default all; the best rerank pool, surge + gsr +
# pcst reranked by the MiniLM cross-encoder, on POOL_TURNS, default 600), turns/s and peak
# RSS, and whether the two stores rank the same paths for every turn (--turns files
# compared), with the page cache as the runs leave it (warm). Variant b adds the facts of the
# HUB_SAMPLE (default 100) entities the dev gold paths name most, small store against big.
# ROWS (default "gsr surge pcst pool") picks the rows, e.g. ROWS="surge pcst"; the hub sample
# reads the turns of the last row run (the pool's 600 by default, all turns without it).
#
# cold: the first pass after dropping the page cache (needs root and a writable
# /proc/sys/vm/drop_caches; refused otherwise) against the pass right after it, gsr and
# surge on the first COLD_TURNS (default 600) dev turns of the big store.
set -euo pipefail
cd "$(dirname "$0")/../.."
phase="${1:?usage: freebase_scale.sh load|attach|retrieve}"
source tools/eval/kg_gsr_store.sh
[ -n "${GEN:-}" ] || cargo build --release --locked --bin trellis-gen-powerlaw >&2
variant="${VARIANT:-a}"
facts="${FACTS:-2300000000}"
entities="${ENTITIES:-100000000}"
budget="${MEMORY_MB:-6144}"
big="$work/fb-$variant"
gen="${GEN:-$CARGO_TARGET_DIR/release/trellis-gen-powerlaw}"
report="$work/freebase-$variant.md"

# Peak of a command: `measure NAME CMD...` runs it under /usr/bin/time, appends "NAME secs MB".
measure() {
    local name="$1"
    shift
    /usr/bin/time -f "%e %M" -o "$work/fb-time.txt" "$@"
    read -r secs kb <"$work/fb-time.txt"
    echo "$name $secs $((kb / 1024))" >>"$work/fb-measures-$variant.txt"
}

# Every entity key of the small store's input, as the loader reads it.
odkg_keys() {
    cut -f1,3 "$data/opendialkg/kg.tsv" | tr '\t' '\n' | grep -v '^$' | LC_ALL=C sort -u >"$work/odkg-keys.txt"
}

if [ "$phase" = attach ]; then
    variant=b
    [ -f "$work/fb-a/CURRENT" ] || { echo "$work/fb-a: no store; run VARIANT=a ... load first" >&2 && exit 2; }
    [ ! -e "$work/fb-b" ] || { echo "$work/fb-b exists: remove it first" >&2 && exit 2; }
    odkg_keys
    : >"$work/fb-measures-b.txt"
    measure generate "$gen" --facts "$facts" --entities "$entities" --relations 1000 --attach "$work/odkg-keys.txt" --only-attached >"$work/fb-attach.tsv"
    measure update "$bin" update --store "$work/fb-a" --format tsv --add "$work/fb-attach.tsv" --json >"$work/fb-attach-report.json"
    mv "$work/fb-a" "$work/fb-b"
    {
        echo "## Variant b: OpenDialKG's entities attached by an update ($(date -u +%Y-%m-%d))"
        echo
        echo "\`FACTS=$facts ENTITIES=$entities bash tools/bench/freebase_scale.sh attach\`: $(wc -l <"$work/odkg-keys.txt") keys, $(wc -l <"$work/fb-attach.tsv") fact lines."
        echo
        echo "| step | seconds | peak RSS MB |"
        echo "|---|---|---|"
        awk '{ printf "| %s | %s | %s |\n", $1, $2, $3 }' "$work/fb-measures-b.txt"
        echo
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("update report:", {k: v for k, v in r.items() if not isinstance(v, (dict, list))})' "$work/fb-attach-report.json"
        echo
    } >>"$work/freebase-b.md"
    cat "$work/freebase-b.md"
    exit 0
fi

if [ "$phase" = load ]; then
    case "$variant" in
        a) attach=() ;;
        b)
            odkg_keys
            attach=(--attach "$work/odkg-keys.txt")
            ;;
        *) echo "VARIANT: a or b" >&2 && exit 2 ;;
    esac
    rm -rf "$big"
    : >"$work/fb-measures-$variant.txt"
    used0=$(df -B1M --output=used "$work" | tail -1)
    : >"$work/fb-disk-$variant.txt"
    (while true; do
        df -B1M --output=used "$work" | tail -1 >>"$work/fb-disk-$variant.txt"
        sleep 5
    done) &
    sampler=$!
    trap 'kill $sampler 2>/dev/null || true' EXIT
    started=$(date +%s)
    "$gen" --facts "$facts" --entities "$entities" --relations 1000 "${attach[@]}" |
        measure load "$bin" -v ingest --store "$big" --memory-mb "$budget" --on-error skip --format tsv \
            --rejects "$work/fb-$variant-rejects.tsv" "$data/opendialkg/kg.tsv" - >"$work/fb-load-$variant.out" 2>"$work/fb-load-$variant.log"
    kill $sampler
    peak=$(sort -n "$work/fb-disk-$variant.txt" | tail -1)
    # INDEX_TOKENS=0 leaves the token index (which retrieve needs) for later.
    if [ "${INDEX_TOKENS:-1}" = 1 ]; then
        measure index-tokens "$bin" index-tokens --store "$big" --tokenizer "$model/tokenizer.json" --linearization trellis >&2
    fi
    {
        echo "## Variant $variant: load ($(date -u +%Y-%m-%d) on $(nproc) cores)"
        echo
        echo "\`VARIANT=$variant FACTS=$facts ENTITIES=$entities MEMORY_MB=$budget bash tools/bench/freebase_scale.sh load\`"
        echo
        tail -n 4 "$work/fb-load-$variant.out" | sed 's/^/    /'
        echo
        echo "| step | seconds | peak RSS MB |"
        echo "|---|---|---|"
        awk '{ printf "| %s | %s | %s |\n", $1, $2, $3 }' "$work/fb-measures-$variant.txt"
        echo
        echo "Budget $budget MB; the store $(du -sm "$big" | cut -f1) MB; disk used during the load at most $((peak - used0)) MB above the start; $(($(date +%s) - started)) s in all."
        sed 's/\x1b\[[0-9;]*m//g' "$work/fb-load-$variant.log" | grep -E "parsed inputs|wrote (adjacency|dictionaries)|wrote SST" | sed 's/^.*INFO /    /'
        echo
    } >>"$report"
    cat "$report"
    exit 0
fi

[ "$phase" = retrieve ] || [ "$phase" = cold ] || { echo "usage: freebase_scale.sh load|attach|retrieve|cold" >&2 && exit 2; }
[ -f "$big/CURRENT" ] || { echo "$big: no store; run the load phase first" >&2 && exit 2; }
dev="$data/opendialkg/dialogs_dev.csv"

if [ "$phase" = cold ]; then
    sync
    echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || { echo "cannot drop the page cache here (needs root and /proc/sys/vm/drop_caches)" >&2 && exit 2; }
    n="${COLD_TURNS:-600}"
    {
        echo "## Variant $variant: cold cache ($(date -u +%Y-%m-%d))"
        echo
        echo "\`VARIANT=$variant bash tools/bench/freebase_scale.sh cold\`: the page cache dropped once, then each row twice in a row on the big store, first $n dev turns."
        echo
        echo "| retriever | pass | turns/s | peak RSS MB |"
        echo "|---|---|---|---|"
    } >>"$report"
    for row in "gsr|--retriever gsr --model $model" "surge|--retriever surge --surge-model models/surge-opendialkg"; do
        IFS='|' read -r name flags <<<"$row"
        for pass in "first (cold)" "second (warm)"; do
            # shellcheck disable=SC2086
            /usr/bin/time -f "%e %M" -o "$work/fb-time.txt" "$bin" eval retrieval --store "$big" --input "$dev" --actions all --max-turns "$n" $flags --json >"$work/fb-eval-cold.json"
            read -r _ kb <"$work/fb-time.txt"
            python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r=r[0] if isinstance(r,list) else r; t=r["turns_per_s"]; print("| %s | %s | %.2f | %d |" % (sys.argv[2], sys.argv[3], t, int(sys.argv[4]) // 1024))' \
                "$work/fb-eval-cold.json" "$name" "$pass" "$kb" >>"$report"
        done
    done
    echo >>"$report"
    cat "$report"
    exit 0
fi
turns="${TURNS:-0}"
pool_turns="${POOL_TURNS:-600}"
rows=(
    "gsr|$turns|--retriever gsr --model $model"
    "surge|$turns|--retriever surge --surge-model models/surge-opendialkg"
    "pcst|$turns|--retriever pcst"
    "surge + gsr + pcst, MiniLM reranker|$pool_turns|--retriever surge --surge-model models/surge-opendialkg --model $model --rerank models/rerank-minilm-opendialkg --rerank-pool gsr,pcst --rerank-top 20"
)
{
    echo "## Variant $variant: retrieval ($(date -u +%Y-%m-%d))"
    echo
    echo "\`VARIANT=$variant bash tools/bench/freebase_scale.sh retrieve\`: \`trellis eval retrieval --store S --input dialogs_dev.csv --json --turns F\` plus the row's flags, the small store ($store) then the big one ($big), one after the other."
    echo
    echo "| retriever | turns | store | path@1 | MRR | turns/s | latency p99 ms | peak RSS MB | same ranked paths as the small store |"
    echo "|---|---|---|---|---|---|---|---|---|"
} >>"$report"
read -r -a picked <<<"${ROWS:-gsr surge pcst pool}"
[ "${#picked[@]}" -gt 0 ] || { echo "ROWS: at least one of gsr, surge, pcst, pool" >&2 && exit 2; }
for w in "${picked[@]}"; do
    case "$w" in gsr | surge | pcst | pool) ;; *) echo "ROWS: gsr, surge, pcst or pool, not '$w'" >&2 && exit 2 ;; esac
done
wanted=" ${picked[*]} "
for row in "${rows[@]}"; do
    IFS='|' read -r name n flags <<<"$row"
    key="${name%%,*}"
    [ "$key" = "surge + gsr + pcst" ] && key=pool
    [[ "$wanted" == *" $key "* ]] || continue
    max=()
    [ "$n" != 0 ] && max=(--max-turns "$n")
    for which in small big; do
        s="$store"
        [ "$which" = big ] && s="$big"
        # shellcheck disable=SC2086
        /usr/bin/time -f "%e %M" -o "$work/fb-time.txt" "$bin" eval retrieval --store "$s" --input "$dev" --actions all "${max[@]}" \
            $flags --json --turns "$work/fb-turns-$which.jsonl" >"$work/fb-eval-$which.json"
        read -r _ kb <"$work/fb-time.txt"
        echo "$kb" >"$work/fb-rss-$which.txt"
    done
    python3 - "$work" "$name" "$report" <<'PY'
import json, sys
work, name, report = sys.argv[1:4]
def row(which):
    r = json.load(open(f"{work}/fb-eval-{which}.json"))
    r = r[0] if isinstance(r, list) else r
    kb = int(open(f"{work}/fb-rss-{which}.txt").read())
    return r, kb
small, big = row("small"), row("big")
a = [json.loads(l) for l in open(f"{work}/fb-turns-small.jsonl")]
b = [json.loads(l) for l in open(f"{work}/fb-turns-big.jsonl")]
same = sum(1 for x, y in zip(a, b) if x == y)
with open(report, "a") as out:
    for which, (r, kb) in (("small", small), ("big", big)):
        verdict = "" if which == "small" else f"{same} of {len(a)} turns" + (" (all)" if same == len(a) == len(b) else "")
        out.write(f"| {name} | {r['turns']} | {which} | {r['path_at']['1']:.4f} | {r['mrr']:.4f} | {r['turns_per_s']:.2f} | {r['latency_ms_p99']:.1f} | {kb // 1024} | {verdict} |\n")
PY
done
echo >>"$report"
if [ "$variant" = b ]; then
    # The caps at work: the facts of the entities the dev gold paths name most, in the big
    # store, against the small one (a capped candidate set reads at most 100 facts and 100
    # two-hop paths of an entity, and gsr's walk expands no entity past 10,000 facts).
    python3 - "$work/fb-turns-small.jsonl" "$bin" "$store" "$big" "${HUB_SAMPLE:-100}" >>"$report" <<'PY'
import collections, json, subprocess, sys
turns, bin_, small, big, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
count = collections.Counter()
for line in open(turns):
    for h, _, t in json.loads(line).get("gold") or []:
        count[h] += 1
        count[t] += 1
def degree(store, key):
    out = subprocess.run([bin_, "entity", "--store", store, "--json", key], capture_output=True, text=True)
    if out.returncode != 0:
        return None
    e = json.loads(out.stdout.splitlines()[0])
    return e["out_degree"] + e["in_degree"]
rows = []
for key, _ in count.most_common(n):
    a, b = degree(small, key), degree(big, key)
    if a is not None and b is not None:
        rows.append((b, a, key))
rows.sort(reverse=True)
print(f"The {len(rows)} entities the dev gold paths name most, facts in the small and the big store: "
      f"{sum(1 for b, a, _ in rows if b > a)} gained synthetic neighbours, {sum(1 for b, _, _ in rows if b > 10000)} have more than "
      f"10,000 facts; the five with most:")
print()
print("| entity | facts, small store | facts, big store |")
print("|---|---|---|")
for b, a, key in rows[:5]:
    print(f"| {key} | {a:,} | {b:,} |")
print()
PY
fi
cat "$report"
