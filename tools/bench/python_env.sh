# Sourced by the benchmarks that run Python references beside Trellis (tools/bench/pcst.sh,
# tools/bench/python_pipeline.sh): builds the binaries and sets $bin, $data, $work, $py (the
# pcst environment of tools/venv.sh: numpy < 2, since pcst_fast 1.0.10's wheel answers wrongly
# under numpy 2) and the OpenDialKG store $work/kg.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source tools/setup.sh
# `internals`: trellis-pcst drives the candidate subgraph and the PCST instance directly.
cargo build --release --locked --bins --features internals >&2
bin="$CARGO_TARGET_DIR/release"
data="${TRELLIS_SHARED_DATA:-../shared/data}"
work="${BENCH_DIR:-/tmp/trellis-bench}"
mkdir -p "$work"
py=$(bash tools/venv.sh pcst)
if [ ! -f "$work/kg/CURRENT" ]; then
    "$bin/trellis" ingest --store "$work/kg" --on-error skip --rejects "$work/kg-rejects.tsv" "$data/opendialkg/kg.tsv" >&2
fi
