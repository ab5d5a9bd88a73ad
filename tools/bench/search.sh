#!/usr/bin/env bash
# Text search latency on the OpenDialKG store (issue 34's goal: p50 under 5 ms, warm):
# benches/search.rs loads kg.tsv + kg_train_paths.tsv, builds the text index, and times
# 500 entity names, the same names misspelt, and 500 dev replies' first 8 words, fuzzy and
# exact. Figures go to the benchmarks doc with this command.
#
#   bash tools/bench/search.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/setup.sh
cargo bench --locked --bench search 2>/dev/null
