#!/usr/bin/env bash
# Installs what building Trellis needs, when missing: a C/C++ toolchain and libclang (for
# RocksDB's bindings), and Rust. Sourced by tools/demo.sh and tools/test.sh.
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
        exit 1
    fi
fi
# The format and lint checks of tools/test.sh.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
    if command -v rustup >/dev/null 2>&1; then
        echo "setup: installing rustfmt and clippy" >&2
        rustup component add rustfmt clippy >&2
    else
        echo "setup: cargo fmt and cargo clippy are missing and there is no rustup to add them" >&2
        exit 1
    fi
fi
# One build profile (release) and one target directory outside the clone, so RocksDB
# (about 14 minutes cold on 2 cores) compiles once per machine, not once per clone.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/trellis/target}"
mkdir -p "$CARGO_TARGET_DIR"
