#!/usr/bin/env bash
# Installs what building Trellis needs, when missing: a C/C++ toolchain and libclang (for
# RocksDB's bindings), and Rust. Sourced by tools/demo.sh and tools/test.sh, and by users
# (`source tools/setup.sh`): the strict options below hold inside the function only
# (`local -`), and a failure returns rather than exits, so a user's interactive shell keeps
# its own options and stays open.
trellis_setup() {
local -
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v c++ >/dev/null 2>&1 || need_apt+=(g++)
# Not `ldconfig -p | grep -q`: under pipefail, grep's early exit makes ldconfig fail with
# SIGPIPE, and the check reinstalled libclang on every run.
if ! grep -q 'libclang\(-[0-9.]*\)\?\.so' <<<"$(ldconfig -p 2>/dev/null)"; then
    need_apt+=(libclang-dev)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: installing ${need_apt[*]}" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "setup: no Rust toolchain found; install one with rustup (https://rustup.rs)" >&2
        return 1
    fi
fi
# The format and lint checks of tools/test.sh.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
    if command -v rustup >/dev/null 2>&1; then
        echo "setup: installing rustfmt and clippy" >&2
        rustup component add rustfmt clippy >&2
    else
        echo "setup: cargo fmt and cargo clippy are missing and there is no rustup to add them" >&2
        return 1
    fi
fi
# One build profile (release) and one target directory outside the clone, so the cold build
# (RocksDB is most of it; the first tools/demo.sh on a fresh machine, cold build included, takes
# about 15 minutes on this 2-core machine) happens once per machine, not once per clone.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/trellis/target}"
mkdir -p "$CARGO_TARGET_DIR"
# ONNX Runtime for the model (`ort` loads it at run time): the shared library of the PyPI
# wheel onnxruntime==1.31.1, kept under ~/.cache/trellis/onnxruntime. Only the wheel's
# libraries are extracted (no Python package is installed). ORT_DYLIB_PATH, when set, wins.
ORT_VERSION=1.31.1
ort_dir="$HOME/.cache/trellis/onnxruntime"
ort_lib="$ort_dir/libonnxruntime.so.$ORT_VERSION"
if [ -z "${ORT_DYLIB_PATH:-}" ] && [ ! -f "$ort_lib" ]; then
    if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
        echo "setup: python3 with pip is needed to fetch onnxruntime==$ORT_VERSION (or set ORT_DYLIB_PATH to a libonnxruntime.so of version 1.24 or later)" >&2
        return 1
    fi
    echo "setup: fetching the onnxruntime==$ORT_VERSION wheel for its shared library" >&2
    ort_tmp="$(mktemp -d)"
    python3 -m pip download --quiet --no-deps --only-binary=:all: "onnxruntime==$ORT_VERSION" -d "$ort_tmp" >&2
    mkdir -p "$ort_dir"
    # Extract to a temporary name first: an interrupted run leaves no half-written library
    # that the check above would take for a complete one.
    python3 - "$ort_tmp" "$ort_dir" <<'PY'
import glob, os, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
(wheel,) = glob.glob(os.path.join(tmp, "onnxruntime-*.whl"))
with zipfile.ZipFile(wheel) as z:
    libs = [n for n in z.namelist() if n.startswith("onnxruntime/capi/lib") and ".so" in n]
    # The main library last: its presence marks a finished extraction.
    libs.sort(key=lambda n: os.path.basename(n).startswith("libonnxruntime.so"))
    for name in libs:
        out = os.path.join(dest, os.path.basename(name))
        with z.open(name) as src, open(out + ".part", "wb") as dst:
            dst.write(src.read())
        os.replace(out + ".part", out)
PY
    rm -rf "$ort_tmp"
fi
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$ort_lib}"
}
trellis_setup
trellis_setup_status=$?
unset -f trellis_setup
# Sourced: hand the status back; run as a script: exit with it.
return "$trellis_setup_status" 2>/dev/null || exit "$trellis_setup_status"
