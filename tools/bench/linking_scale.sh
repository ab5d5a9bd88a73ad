#!/usr/bin/env bash
# How linking time grows with a message's length: one message of 0.5, 1, 2 and 4 MB (the
# bundled sample's entity names between filler words, so that mentions are dense), linked
# by `trellis link --input` on the sample store; the exponent between successive sizes
# (1.0 is linear). Issue 32 found a 5 MB message taking 72 s (about n^1.45) before linking
# counted character offsets from the previous mention instead of the text's start.
#
#   bash tools/bench/linking_scale.sh                       # this build
#   TRELLIS_BIN=/path/to/old/trellis bash tools/bench/linking_scale.sh   # another, to compare
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/setup.sh
cargo build --release --locked --bin trellis >&2
bin="${TRELLIS_BIN:-$CARGO_TARGET_DIR/release/trellis}"  # TRELLIS_BIN: another build, side by side
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" ingest --store "$work/kg" tests/fixtures/opendialkg-sample.tsv >/dev/null 2>&1
echo "| message | mentions | seconds | exponent against the previous size |"
echo "|---|---|---|---|"
prev_size=""
prev_secs=""
for kb in 512 1024 2048 4096; do
    python3 - "$kb" "$work/dialog.json" <<'PY'
import csv, json, sys
kb, out = int(sys.argv[1]), sys.argv[2]
names = []
with open("tests/fixtures/opendialkg-sample.tsv", encoding="utf-8") as f:
    for row in csv.reader(f, delimiter="\t"):
        if row:
            names.append(row[0])
words, size, i = [], 0, 0
while size < kb * 1024:
    w = names[i % len(names)] if i % 3 == 0 else "and then something else happened"
    words.append(w)
    size += len(w) + 1
    i += 1
json.dump([" ".join(words)], open(out, "w"))
PY
    start=$(date +%s.%N)
    mentions=$("$bin" link --store "$work/kg" --input "$work/dialog.json" --json | grep -c '"message"' || true)
    end=$(date +%s.%N)
    secs=$(python3 -c "print(f'{$end - $start:.2f}')")
    exponent="-"
    if [ -n "$prev_size" ]; then
        exponent=$(python3 -c "import math; print(f'{math.log($secs / $prev_secs) / math.log($kb / $prev_size):.2f}')")
    fi
    echo "| $kb KB | $mentions | $secs | $exponent |"
    prev_size=$kb
    prev_secs=$secs
done
