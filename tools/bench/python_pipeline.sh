#!/usr/bin/env bash
# The whole OpenDialKG dev set through Trellis and through the Python pipeline doing the
# same work (tools/bench/python_pipeline.py: networkx graph in memory, rank_bm25, pcst_fast), on
# the same candidates, side by side on this machine; checks that both give the same
# answers and prints the timings.
#
#   bash tools/bench/python_pipeline.sh     # BENCH_DIR (default /tmp/trellis-bench)
#
# Both sides get the same entities per turn: Trellis links them once (`--retriever all`),
# and the timed runs pass them as "entities", so neither side's time includes linking.
# Python's time is its retrieval loop (candidates and ranking; not loading the graph,
# reading or writing); Trellis's is the whole `trellis retrieve` process (opening the
# store, reading requests, writing the 10 best paths of each).
set -euo pipefail
source "$(dirname "$0")/python_env.sh"
"$py" tools/data/opendialkg_requests.py "$data/opendialkg/dialogs_dev.csv" -o "$work/req.jsonl"
"$bin/trellis" retrieve --store "$work/kg" --retriever all --input "$work/req.jsonl" --output "$work/linked.jsonl" --top 1 2>/dev/null
"$py" - "$work/req.jsonl" "$work/linked.jsonl" "$work/req-entities.jsonl" <<'PY'
import json, sys
with open(sys.argv[1]) as req, open(sys.argv[2]) as linked, open(sys.argv[3], "w") as out:
    for r, l in zip(req, linked):
        r, l = json.loads(r), json.loads(l)
        assert r["id"] == l["id"]
        r["entities"] = l["mentioned"]  # OpenDialKG's entity keys are their names
        out.write(json.dumps(r) + "\n")
PY
echo "| retriever | requests | Python retrieval | Trellis, 1 thread | Trellis, $(nproc) threads | speed-up (1 thread) | speed-up ($(nproc) threads) | same answers |"
echo "|---|---|---|---|---|---|---|---|"
for spec in "bm25" "pcst seed003" "pcst g-retriever"; do
    set -- $spec
    retriever=$1
    opts=(--retriever "$retriever")
    pyopts=(--retriever "$retriever")
    name=$retriever
    if [ "$retriever" = pcst ]; then
        opts+=(--pcst-variant "$2")
        pyopts+=(--pcst-variant "$2")
        name="pcst ($2)"
    fi
    # The best 1,000 paths (the most `--top` takes), for the agreement check; then the timed runs.
    "$bin/trellis" retrieve --store "$work/kg" "${opts[@]}" --input "$work/req-entities.jsonl" --output "$work/t-full.jsonl" --top 1000 2>/dev/null
    "$py" tools/bench/python_pipeline.py --kg "$data/opendialkg/kg.tsv" --requests "$work/req-entities.jsonl" \
        --mentioned "$work/linked.jsonl" "${pyopts[@]}" --top 1000 --compare "$work/t-full.jsonl" >"$work/py.json" 2>"$work/py.err" || true
    /usr/bin/time -o "$work/t1.txt" -f "%e" "$bin/trellis" retrieve --store "$work/kg" "${opts[@]}" --input "$work/req-entities.jsonl" \
        --output "$work/t-top.jsonl" --top 10 --threads 1 2>/dev/null
    /usr/bin/time -o "$work/tn.txt" -f "%e" "$bin/trellis" retrieve --store "$work/kg" "${opts[@]}" --input "$work/req-entities.jsonl" \
        --output "$work/t-top.jsonl" --top 10 2>/dev/null
    "$py" - "$name" "$work/py.json" "$(tail -1 "$work/t1.txt")" "$(tail -1 "$work/tn.txt")" <<'PY'
import json, sys
name, path, t1, tn = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
r = json.load(open(path))
same = f"{r['agree']}/{r['requests']}"
print(f"| {name} | {r['requests']} | {r['retrieve_s']:.1f} s | {t1:.2f} s | {tn:.2f} s | {r['retrieve_s'] / t1:.0f}x | {r['retrieve_s'] / tn:.0f}x | {same} |")
PY
done
