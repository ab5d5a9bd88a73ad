# Sourced by the benchmarks that run Python references beside Trellis (bench_pcst.sh,
# bench_python_pipeline.sh): builds the binaries and sets $bin, $data, $work, $py (a venv
# with numpy < 2, since pcst_fast 1.0.10's wheel answers wrongly under numpy 2) and the
# OpenDialKG store $work/kg.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tools/setup.sh
cargo build --release --locked --bins >&2
bin="$CARGO_TARGET_DIR/release"
data="${TRELLIS_SHARED_DATA:-../shared/data}"
work="${BENCH_DIR:-/tmp/trellis-bench}"
mkdir -p "$work"
if [ ! -x "$work/venv-pcst/bin/python" ]; then
    python3 -m venv "$work/venv-pcst"
    "$work/venv-pcst/bin/pip" install -q "numpy<2" pcst_fast==1.0.10 networkx==3.6.1 rank_bm25==0.2.2 >&2
fi
py="$work/venv-pcst/bin/python"
if [ ! -f "$work/kg/CURRENT" ]; then
    "$bin/trellis" ingest --store "$work/kg" --on-error skip --rejects "$work/kg-rejects.tsv" "$data/opendialkg/kg.tsv" >&2
fi
