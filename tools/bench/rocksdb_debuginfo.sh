#!/usr/bin/env bash
# What debug information costs RocksDB's C++ compile: a fixed sample of its translation
# units compiled with the flags librocksdb-sys's build script passes (from a cold build's
# command lines), once with `-g -gdwarf-4` (what a profile with debug info gives every
# dependency) and once without (Cargo.toml's `[profile.release.package."*"] debug = false`).
# CPU seconds (user + sys) per variant; a quick stand-in for two full cold builds
# (tools/bench/cold_build.sh), which take an hour on this 2-core machine.
# Usage: [JOBS=2] bash tools/bench/rocksdb_debuginfo.sh [NUMBER_OF_FILES]
set -euo pipefail
n="${1:-12}"
src=$(ls -d "$HOME"/.cargo/registry/src/*/librocksdb-sys-0.19.0+11.8.1 | head -1)
zstd=$(ls -d "$HOME"/.cargo/registry/src/*/zstd-sys-2.1.2+zstd.1.5.7/zstd/lib | head -1)
cd "$src"
# Every 10th file of the sorted source list: spread over the code base, the same each run.
mapfile -t files < <(cd rocksdb && find . -name '*.cc' -not -path '*/test*' -not -name '*_test.cc' -not -name '*bench*' \
    -not -path './java/*' -not -path './tools/*' -not -path './examples/*' -not -path './third-party/*' -not -path './microbench/*' \
    -not -path './fuzz/*' -not -path './plugin/*' | sort | awk 'NR % 10 == 1' | head -n "$n")
flags=(-O3 -ffunction-sections -fdata-sections -fPIC -fno-omit-frame-pointer -m64 -march=x86-64 -I rocksdb/include/ -I rocksdb/
    -I "$zstd" -I . -w -msse2 -std=c++20 -include cstdint -DZSTD=1 -DNDEBUG=1 -DHAVE_ALIGNED_NEW
    -DHAVE_UINT128_EXTENSION -DOS_LINUX -DROCKSDB_PLATFORM_POSIX -DROCKSDB_LIB_IO_POSIX -DROCKSDB_SCHED_GETCPU_PRESENT
    -DROCKSDB_AUXV_GETAUXVAL_PRESENT -DROCKSDB_FALLOCATE_PRESENT -DROCKSDB_RANGESYNC_PRESENT)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for variant in "with -g -gdwarf-4" "without debug info"; do
    extra=()
    [ "$variant" = "with -g -gdwarf-4" ] && extra=(-g -gdwarf-4)
    start=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
    rm -f "$out"/*.o
    # Two compilers at a time (the machine's cores); CPU time adds up over both.
    i=0
    for f in "${files[@]}"; do
        c++ "${flags[@]}" "${extra[@]}" -c "rocksdb/$f" -o "$out/$(echo "${f#./}" | tr / _).o" &
        i=$((i + 1))
        if [ $((i % ${JOBS:-2})) -eq 0 ]; then wait; fi
    done
    wait
    bytes=$(cat "$out"/*.o | wc -c)
    end=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
    ticks=$(getconf CLK_TCK)
    echo "$variant: ${#files[@]} files, $(( (end - start) / ticks )) CPU s, objects $((bytes / 1024 / 1024)) MiB"
done
