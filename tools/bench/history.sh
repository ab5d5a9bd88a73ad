#!/usr/bin/env bash
# How `trellis respond` scales with the length of the dialog history: synthetic dialogs of
# 100, 1,000 and 10,000 messages (sentences about the bundled sample's entities, alternating
# speakers), the shipped generator (models/generator-opendialkg: every message in its window,
# `input.turns` 0, cut to 192 tokens), bm25 retrieval on the bundled sample store. One call per
# size; prints the wall time and the pipeline's own stage timings.
#
#   bash tools/bench/history.sh [SIZES...]             (default: 100 1000 10000)
#   BIN=/path/to/other/trellis bash tools/bench/history.sh 100 1000   (another build)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/trellis/target}/release/trellis}"
generator="${GENERATOR:-models/generator-opendialkg}"
work="${BENCH_DIR:-$(mktemp -d)}"
mkdir -p "$work"
store="$work/store"
[ -f "$store/CURRENT" ] || "$bin" ingest --store "$store" tests/fixtures/opendialkg-sample.tsv >/dev/null
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(100 1000 10000)
echo "| messages | wall s | link ms | retrieve ms | generate ms |"
echo "|---:|---:|---:|---:|---:|"
for n in "${sizes[@]}"; do
    python3 - "$n" "$work/dialog-$n.json" <<'PY'
import json, sys
n, path = int(sys.argv[1]), sys.argv[2]
subjects = ["Meryl Streep", "The Devil Wears Prada", "Will Smith", "Neil Gaiman", "Robert De Niro", "Dean Koontz"]
forms = ["Do you like {}?", "I think {} is great, have you seen anything else like it?",
         "Yes! {} is one of my favourites.", "What else do you know about {}?"]
history = [{"speaker": "user" if i % 2 == 0 else "assistant", "text": forms[i % len(forms)].format(subjects[i % len(subjects)])}
           for i in range(n)]
json.dump({"history": history}, open(path, "w"))
PY
    start=$(date +%s.%N)
    "$bin" respond --store "$store" --retriever bm25 --generator "$generator" --dialog "$work/dialog-$n.json" --json >"$work/reply-$n.json"
    end=$(date +%s.%N)
    python3 - "$n" "$start" "$end" "$work/reply-$n.json" <<'PY'
import json, sys
n, start, end, path = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
t = json.load(open(path))["timings"]
print(f"| {n:,} | {end - start:.2f} | {t['link_ms']:.0f} | {t['retrieve_ms']:.0f} | {t['generate_ms']:.0f} |")
PY
done
