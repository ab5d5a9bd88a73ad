"""Shared fixtures: the bundled sample loaded into a store (with the shipped retriever's
token index), the shipped models, the `trellis` binary and the shared data sets."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import trellis

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "tests" / "fixtures" / "opendialkg-sample.tsv"
GSR = REPO / "models" / "gsr-opendialkg"
GENERATOR = REPO / "models" / "generator-opendialkg"


@pytest.fixture(scope="session")
def store_dir(tmp_path_factory):
    """The sample store, indexed with the shipped retriever's tokenizer."""
    d = tmp_path_factory.mktemp("sample") / "kg"
    trellis.ingest(d, [SAMPLE])
    trellis.index_tokens(d, GSR / "tokenizer.json")
    return d


@pytest.fixture(scope="session")
def store(store_dir):
    return trellis.Store.open_read_only(store_dir)


@pytest.fixture(scope="session")
def trellis_bin():
    """The command line, to compare answers with: TRELLIS_BIN, else the release build in
    CARGO_TARGET_DIR (tools/test.sh builds it before the Python suite runs)."""
    explicit = os.environ.get("TRELLIS_BIN")
    target = os.environ.get("CARGO_TARGET_DIR", str(Path.home() / ".cache" / "trellis" / "target"))
    path = Path(explicit) if explicit else Path(target) / "release" / "trellis"
    if not path.exists():
        pytest.fail(f"{path} is missing: build it (cargo build --release --bin trellis) or set TRELLIS_BIN")
    return path


@pytest.fixture(scope="session")
def dev_csv():
    root = Path(os.environ.get("TRELLIS_SHARED_DATA", REPO.parent / "shared" / "data"))
    p = root / "opendialkg" / "dialogs_dev.csv"
    if not p.exists():
        pytest.fail(f"{p} is missing: these tests need the shared data sets (set TRELLIS_SHARED_DATA)")
    return p


@pytest.fixture(scope="session")
def dev_requests(dev_csv):
    """The first 60 dev turns as `trellis retrieve` requests."""
    out = subprocess.run(
        [sys.executable, str(REPO / "tools" / "data" / "opendialkg_requests.py"), str(dev_csv)], check=True, capture_output=True, text=True
    ).stdout
    return [json.loads(line) for line in out.splitlines()[:60]]


def run_cli(binary, *args):
    """Runs the command line; its stdout."""
    return subprocess.run([str(binary), *map(str, args)], check=True, capture_output=True, text=True).stdout


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
