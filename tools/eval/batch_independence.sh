#!/usr/bin/env bash
# Does a request's answer depend on the other requests of its batch? Runs `trellis retrieve`
# (gsr) and `trellis run` over the first N OpenDialKG dev requests with --batch 1, with
# --batch 8, and with --batch 8 on the requests in reverse order, and counts the requests whose
# output line differs from the --batch 1 one (without its input line number; run: without
# its timings), the ranked path lists
# that differ, and the largest score difference of a path found in both.
#
#   BENCH_DIR=/tmp/bench N=200 [BIN=path/to/trellis] [MODEL=DIR] [GENERATOR=DIR] \
#       bash tools/eval/batch_independence.sh
#
# BIN and the model directories default to this checkout's; naming another binary and other
# models compares an earlier version (the before/after figures of
# docs/results-2026-11-25.md, "Batch independence").
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/eval/kg_gsr_store.sh
bin="${BIN:-$bin}"
generator="${GENERATOR:-models/generator-opendialkg}"
n="${N:-200}"
python3 tools/data/opendialkg_requests.py "$data/opendialkg/dialogs_dev.csv" >"$work/bi-all.jsonl" 2>/dev/null
head -n "$n" "$work/bi-all.jsonl" >"$work/bi-requests.jsonl"
tac "$work/bi-requests.jsonl" >"$work/bi-reversed.jsonl"
for cmd in retrieve run; do
    extra=()
    [ "$cmd" = run ] && extra=(--generator "$generator")
    for v in "1 bi-requests" "8 bi-requests" "8 bi-reversed"; do
        read -r batch input <<<"$v"
        "$bin" "$cmd" --store "$store" --retriever gsr --model "$model" "${extra[@]}" --batch "$batch" \
            --input "$work/$input.jsonl" --output "$work/bi-$cmd-$batch-$input.jsonl" >/dev/null 2>&1
    done
    python3 - "$cmd" "$work/bi-$cmd-1-bi-requests.jsonl" "$work/bi-$cmd-8-bi-requests.jsonl" "$work/bi-$cmd-8-bi-reversed.jsonl" <<'PY'
import json, sys
cmd, files = sys.argv[1], sys.argv[2:]
def load(f):
    out = {}
    for line in open(f):
        v = json.loads(line)
        v.pop("timings", None)
        v.pop("line", None)
        out[v["id"]] = v
    return out
base = load(files[0])
for name, f in zip(["--batch 8", "--batch 8, reversed"], files[1:]):
    other = load(f)
    lines = ranks = replies = 0
    worst = 0.0
    for k, a in base.items():
        b = other[k]
        if a != b:
            lines += 1
        pa = [json.dumps(p["triples"]) for p in a.get("paths", [])]
        pb = [json.dumps(p["triples"]) for p in b.get("paths", [])]
        ranks += pa != pb
        replies += a.get("response") != b.get("response")
        sb = {json.dumps(p["triples"]): p["score"] for p in b.get("paths", [])}
        for p in a.get("paths", []):
            key = json.dumps(p["triples"])
            if key in sb:
                worst = max(worst, abs(p["score"] - sb[key]))
    extra = f", replies differ {replies}" if cmd == "run" else ""
    print(f"{cmd}: --batch 1 against {name}: {lines} of {len(base)} lines differ, ranked path lists {ranks}{extra}, largest score difference {worst:.3g}")
PY
done
