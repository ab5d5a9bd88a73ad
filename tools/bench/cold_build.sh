#!/usr/bin/env bash
# Cold build of the `trellis` binary (what tools/demo.sh builds first), with and without
# debug information for the dependencies, each in an empty target directory.
# Usage: BENCH_DIR=/tmp/cold [NICE=19] [JOBS=1] [SIDE_BY_SIDE=1] bash tools/bench/cold_build.sh
# Reports wall time and CPU time (user + sys). CPU time is the figure to compare when the
# machine is busy with other work (run with NICE=19 then); wall time only on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/setup.sh
bench="${BENCH_DIR:-/tmp/trellis-cold-build}"
rm -rf "$bench" && mkdir -p "$bench"
build_variant() {
    local variant=$1
    src="$bench/$variant/src-tree"
    mkdir -p "$src"
    git archive HEAD | tar -x -C "$src"
    if [ "$variant" = with-dependency-debuginfo ]; then
        # The profile before the override: dependencies inherit `debug = "line-tables-only"`.
        python3 - "$src/Cargo.toml" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
s = re.sub(r'\n(#[^\n]*\n)*\[profile\.release\.package\."\*"\]\ndebug = false\n', "\n", s)
open(p, "w").write(s)
PY
    fi
    grep -q 'profile.release.package' "$src/Cargo.toml" && echo "$variant: override present" || echo "$variant: no override"
    ( cd "$src" && CARGO_TARGET_DIR="$bench/$variant/target" /usr/bin/time -f "$variant: wall %e s, user %U s, sys %S s, max RSS %M KB" \
        nice -n "${NICE:-0}" cargo build --release --locked --bin trellis ${JOBS:+-j "$JOBS"} >"$bench/$variant/build.log" 2>&1 ) 2>>"$bench/times.txt" || { tail -20 "$bench/$variant/build.log"; return 1; }
    du -sh "$bench/$variant/target" | sed "s|^|$variant target: |" >>"$bench/times.txt"
}
# SIDE_BY_SIDE=1 builds both at once (JOBS=1 each on a 2-core machine): the same machine
# state for both, in one run. Otherwise one after the other.
if [ "${SIDE_BY_SIDE:-0}" = 1 ]; then
    build_variant with-dependency-debuginfo &
    build_variant without-dependency-debuginfo &
    wait
else
    build_variant with-dependency-debuginfo
    build_variant without-dependency-debuginfo
fi
cat "$bench/times.txt"
