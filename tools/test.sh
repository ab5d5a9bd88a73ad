#!/usr/bin/env bash
# Runs the whole test suite (unit, property and integration tests) in release mode.
# Usage: bash tools/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
cargo test --release --locked "$@"
