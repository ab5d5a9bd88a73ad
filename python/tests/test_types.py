"""The answer types of trellis.types against real answers (every key a real answer has is
declared, with its type), and mypy on a typed use of the package (python/tests/typed_use.py),
so the stubs and the types cannot drift from the module."""

import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import trellis
from trellis import types
from conftest import GENERATOR, GSR, REPO


def check(value, td, where):
    """`value` has every required key of TypedDict `td` and no undeclared one, each of its
    declared type (recursively through lists and nested TypedDicts)."""
    hints = typing.get_type_hints(td)
    assert isinstance(value, dict), where
    missing = td.__required_keys__ - value.keys()
    extra = value.keys() - hints.keys()
    assert not missing and not extra, f"{where}: missing {missing}, undeclared {extra}"
    for k, v in value.items():
        check_value(v, hints[k], f"{where}.{k}")


def check_value(v, hint, where):
    origin = typing.get_origin(hint)
    if hint is typing.Any:
        return
    if origin is list:
        (item,) = typing.get_args(hint)
        assert isinstance(v, list), where
        for i, x in enumerate(v):
            check_value(x, item, f"{where}[{i}]")
    elif origin is dict:
        assert isinstance(v, dict), where
    elif isinstance(hint, type) and issubclass(hint, dict) and hasattr(hint, "__required_keys__"):
        check(v, hint, where)
    elif hint is float:
        assert isinstance(v, (int, float)) and not isinstance(v, bool), where
    else:
        assert isinstance(v, hint), f"{where}: {v!r} is not {hint}"


def test_answers_have_the_declared_shapes(store):
    gsr = trellis.Retriever(store, "gsr", model=GSR, top=3)
    history = ["I loved Happy Gilmore.", "Me too, Adam Sandler is so funny. Do you like him?"]
    check(gsr.retrieve(history), types.Answer, "Answer")
    check(trellis.Retriever(store, "pcst").retrieve_batch([{"id": 7, "history": history}])[0], types.Answer, "Answer with id")
    for m in trellis.Linker(store).link(history[1]):
        check(m, types.Mention, "Mention")
    chain = trellis.Pipeline(store, "gsr", model=GSR, generator=GENERATOR, gen_return_sequences=2)
    check(chain.respond(history), types.Reply, "Reply")
    g = trellis.Generator(GENERATOR)
    check(g.generate(history, knowledge=[[["Adam Sandler", "~Starred actors", "Happy Gilmore"]]]), types.Generated, "Generated")


def test_a_typed_use_of_the_package_passes_mypy():
    mypy = pytest.importorskip("mypy.api")
    out, err, code = mypy.run(["--strict", "--no-incremental", str(Path(__file__).with_name("typed_use.py"))])
    assert code == 0, out + err
    # And a wrong use fails it: the check can fail.
    bad = Path(os.environ.get("TMPDIR", "/tmp")) / "trellis_typed_bad.py"
    bad.write_text("import trellis\ndef f(r: trellis.Retriever) -> int:\n    return r.retrieve(['x'])['pathz']\n", encoding="utf-8")
    out, _, code = mypy.run(["--strict", "--no-incremental", str(bad)])
    assert code != 0 and "pathz" in out, out


def test_a_resolved_mention_has_its_declared_shape(tmp_path):
    g = tmp_path / "g.tsv"
    g.write_text("Lev Grossman\tGender\tMale\nThe Magician's Land\twritten_by\tLev Grossman\n")
    trellis.ingest(tmp_path / "kg", [g])
    linker = trellis.Linker(tmp_path / "kg", rewrite=True)
    mentions = linker.link([{"speaker": "user", "text": "Do you know Lev Grossman?"}, {"speaker": "assistant", "text": "He wrote The Magician's Land."}])
    he = [m for m in mentions if m["kind"] == "resolved"]
    assert [(m["text"], m["entities"][0]["name"]) for m in he] == [("He", "Lev Grossman")]
    assert he[0]["resolution"]["agreed"] == [["Lev Grossman", "Gender", "Male"]]
    for m in mentions:
        check(m, types.Mention, "Mention")
    # The same dialog without the rewrite: no resolution anywhere.
    assert all("resolution" not in m for m in trellis.Linker(tmp_path / "kg").link([{"speaker": "user", "text": "He wrote it."}]))
    with pytest.raises(trellis.SettingError, match="maybe"):
        trellis.Linker(tmp_path / "kg", rewrite="maybe")
