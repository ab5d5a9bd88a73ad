"""One surface for every front end: the settings of tests/fixtures/settings/cases.json, given
to Python as keyword arguments, are accepted or refused as the library and the command line
treat them (tests/integration/settings.rs), with the same sentence."""

import json
import re

import pytest

import trellis
from conftest import GENERATOR, REPO

CASES = json.loads((REPO / "tests" / "fixtures" / "settings" / "cases.json").read_text(encoding="utf-8"))["cases"]


def python_value(name, v):
    if isinstance(v, list):
        return [python_value(name, x) for x in v]
    if isinstance(v, str) and re.fullmatch(r"[-+]?\d+", v):
        return int(v)
    if isinstance(v, str) and (name.endswith("model") or name == "rerank"):
        return REPO / v
    return v


def build(store, case):
    kwargs = {k: python_value(k, v) for k, v in case["settings"].items()}
    if case["component"] == "retriever":
        return trellis.Retriever(store, case["kind"], **kwargs)
    return trellis.Pipeline(store, case["kind"], generator=GENERATOR, **kwargs)


@pytest.mark.parametrize("case", CASES, ids=[f"{c['component']}-{c['kind']}-{'-'.join(c['settings']) or 'none'}" for c in CASES])
def test_python_treats_every_case_as_the_library_and_command_line_do(store, case):
    if "refused" in case:
        with pytest.raises(trellis.SettingError) as e:
            build(store, case)
        assert str(e.value) == case["refused"]
    else:
        build(store, case)


def test_unknown_names_raise_setting_error_with_the_closest_name(store):
    with pytest.raises(trellis.SettingError, match=r"^unknown setting `rerank_topp` for a retriever \(did you mean `rerank_top`\?\)$"):
        trellis.Retriever(store, "pcst", rerank_topp=3)
    with pytest.raises(trellis.SettingError, match=r"^unknown setting `windw` for a linker \(did you mean `window`\?\)$"):
        trellis.Linker(store, windw=3)
    with pytest.raises(trellis.SettingError, match=r"^unknown setting `beems` for a generator \(did you mean `beams`\?\)$"):
        trellis.Generator(GENERATOR, beems=2)
    with pytest.raises(trellis.SettingError, match=r"^unknown retriever \"nope\""):
        trellis.Retriever(store, "nope")


def test_values_python_cannot_overflow(store):
    # An int of any size is refused with the range, as the command line refuses it.
    with pytest.raises(trellis.SettingError, match=r"^top must be within 1\.\.=100000, not 18446744073709551615$"):
        trellis.Retriever(store, "pcst", top=2**64 - 1)
    with pytest.raises(trellis.SettingError, match=rf"^top must be within 1\.\.=100000, not {2**130}$"):
        trellis.Retriever(store, "pcst", top=2**130)
    with pytest.raises(trellis.SettingError, match=r"^top must be within 1\.\.=64, not -5$"):
        trellis.Pipeline(store, "bm25", generator=GENERATOR, top=-5)
    with pytest.raises(trellis.SettingError, match=r"^limit must be within"):
        store.neighbors("Jordan Spieth", limit=2**200)
    with pytest.raises(TypeError, match="expected an int, not str"):
        store.neighbors("Jordan Spieth", hops="2")
    with pytest.raises(trellis.SettingError, match=r"^limit must be within"):
        store.neighbors("Jordan Spieth", limit=2**70)
    with pytest.raises(trellis.SettingError, match=r"^hops must be within 1\.\.=2, not 3$"):
        store.neighbors("Jordan Spieth", hops=3)
    with pytest.raises(trellis.BadInputError, match=r"no entity #18446744073709551616"):
        store.entity(2**64)
    with pytest.raises(trellis.SettingError, match=r"^seed must be within"):
        trellis.Generator(GENERATOR).generate(["hi"], seed=-1)
    with pytest.raises(trellis.SettingError, match=r"^`beams` cannot be a dict"):
        trellis.Retriever(store, "gsr", model=REPO / "models" / "gsr-opendialkg", beams={})


def test_settings_are_checked_without_a_store_or_a_model():
    trellis.check_settings("retriever", "gsr", model="no/such/dir", beams=4)
    with pytest.raises(trellis.SettingError, match=r"^`beams` does not apply to the bm25 retriever"):
        trellis.check_settings("retriever", "bm25", beams=4)
    with pytest.raises(trellis.SettingError, match=r"^gen_beams must be within"):
        trellis.check_settings("pipeline", "bm25", gen_beams=0)
    with pytest.raises(trellis.SettingError, match=r"^unknown setting `windw` for a linker"):
        trellis.check_settings("linker", windw=3)
