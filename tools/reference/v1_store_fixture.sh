#!/usr/bin/env bash
# Freezes tests/fixtures/stores/v1-sample: a format-v1 store of the bundled sample, which
# tests reopen (and later builds migrate). Run once per format version, never rewrite it.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=tests/fixtures/stores/v1-sample
# Frozen: a rerun would write the current format over the v1 store the migration tests need.
if [ -e "$out" ]; then
    echo "v1_store_fixture.sh: $out exists and is frozen (format v1); it is never rewritten" >&2
    exit 1
fi
source tools/setup.sh
cargo build --release --locked --bin trellis
"$CARGO_TARGET_DIR/release/trellis" ingest --store "$out" tests/fixtures/opendialkg-sample.tsv
# Runtime files RocksDB recreates: not part of the frozen format.
rm -f "$out/LOCK" "$out"/gen-*/LOCK "$out"/gen-*/LOG*
"$CARGO_TARGET_DIR/release/trellis" validate --store "$out"
