#!/usr/bin/env bash
# Runs the whole test suite (unit, property and integration tests) in release mode, after
# the format and lint checks, then the Python package's pytest suite (tools/python.sh).
# Usage: bash tools/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
# One profile and one target directory for everything: clippy reuses the release build of
# the dependencies (RocksDB is not compiled again).
cargo fmt --all --check
cargo clippy --release --locked --all-targets -- -D warnings
# The targets that need the unstable `internals` feature (skipped above): the automaton's
# bench and the PCST reference tool.
cargo clippy --release --locked --bench decode_step --bin trellis-pcst --features internals -- -D warnings
# The library alone, without the command line's dependencies.
cargo clippy --release --locked --lib --no-default-features -- -D warnings
# The Python package's native module (python/, a workspace member).
cargo clippy --release --locked -p trellis-python -- -D warnings
# The API documentation builds without a warning (broken or private intra-doc links).
RUSTDOCFLAGS="-D warnings" cargo doc --release --locked --no-deps
# The public API is the committed snapshot: a change of the surface is deliberate (the
# script prints the difference and how to write the snapshot again).
python3 tools/eval/public_api.py --check docs/api-surface.txt "$CARGO_TARGET_DIR/doc/trellis"
cargo test --release --locked "$@"
# The host application of examples/ (ingest, index, link, retrieve, reply with the shipped
# models), built by `cargo test` above and run as a user would.
cargo run --release --locked --quiet --example host
# The Python package: built into the same target directory (RocksDB is not compiled again)
# and installed into its environment with Ray Data (~/.cache/trellis/venv-ray), then its
# pytest suite, trellis.ray on a local Ray cluster included (TRELLIS_RAY=0: the smaller
# environment without Ray, whose tests are then skipped).
TRELLIS_RAY=${TRELLIS_RAY:-1} TRELLIS_BIN="$CARGO_TARGET_DIR/release/trellis" bash tools/python.sh
