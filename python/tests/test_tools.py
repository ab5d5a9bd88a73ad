"""The results tools that read the engine's output: checked against the engine itself."""

import json
import subprocess
import sys

from conftest import REPO, run_cli

ENCODERS = REPO / "tests" / "fixtures" / "encoders"


def test_fusion_recomputes_the_engines_order_at_any_weight(store_dir, trellis_bin, dev_csv, tmp_path):
    """tools/eval/fusion.py, given one `eval retrieval --turns` file of a reranked run, gives
    the path@1 the engine gives when run again at another `--rerank-fusion` weight."""
    args = ["eval", "retrieval", "--store", store_dir, "--input", dev_csv, "--max-turns", "400", "--json"]
    args += ["--retriever", "pcst", "--rerank", ENCODERS / "cross", "--rerank-pool", "bm25", "--rerank-top", "10"]
    engine = {}
    for w in ("0", "0.5", "1", "5"):
        report = json.loads(run_cli(trellis_bin, *args, "--rerank-fusion", w, "--turns", tmp_path / f"w{w}.jsonl"))
        engine[w] = report["path_at"]["1"]
    assert len(set(engine.values())) > 1, f"the weights must change path@1 on these turns, or nothing is checked: {engine}"
    for run in ("0", "1"):
        out = subprocess.run(
            [sys.executable, str(REPO / "tools" / "eval" / "fusion.py"), str(tmp_path / f"w{run}.jsonl")], check=True, capture_output=True, text=True
        ).stdout
        rows = {}
        for line in out.splitlines():
            cells = [c.strip() for c in line.strip("|").split("|")]
            if line.startswith("| cross-encoder + "):
                rows[cells[0].split()[2]] = float(cells[1])
        for w, p1 in engine.items():
            assert rows[w] == round(p1, 4), f"from the run at {run}: weight {w}: {rows[w]} against the engine's {p1}"
    # Each retriever alone: its own path@1, from its own run.
    pcst = json.loads(run_cli(trellis_bin, *args[: args.index("--retriever")], "--retriever", "pcst"))["path_at"]["1"]
    assert f"| pcst alone | {pcst:.4f} |" in out, out
