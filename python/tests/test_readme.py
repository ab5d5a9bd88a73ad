"""The README's Python session runs as printed (as `cargo test --doc` compiles its Rust
example): its block is read from README.md and run in a scratch directory holding the
repository's fixtures and models, and what it leaves is checked."""

import contextlib
import io
import os
import re

import trellis
from conftest import REPO


def readme_python_block():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Python and Ray") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README.md's Python section has a python block"
    return match.group(1)


def test_the_readmes_python_session_runs(tmp_path, monkeypatch):
    for name in ("tests", "models"):
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    lines = readme_python_block().splitlines()
    scope = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        # Line by line, so that a failure names the README's line.
        for line in lines:
            exec(compile(line, "README.md python block: " + line, "single" if line.strip() and not line.lstrip().startswith("#") else "exec"), scope)
    assert (tmp_path / "kg" / "CURRENT").exists()
    assert "load" in printed.getvalue(), "ingest's progress reached print"
    store = scope["store"]
    assert [t["name"] for t in store.stats()["token_indexes"]] == ["tokenizer.json"]
    answer = scope["chain"].respond(["Do you know anything about Jordan Spieth?"])
    # The reply names an entity of the paths it was given (the delexicalized generator's promise).
    names = {name for path in answer["knowledge"] for head, _, tail in path for name in (head, tail)}
    assert any(name in answer["response"] for name in names), (answer["response"], names)
    assert 0.0 <= trellis.metrics.bleu(["Jordan Spieth plays golf."], ["Jordan Spieth is a golfer."]) <= 1.0
    assert os.getcwd() == str(tmp_path)
