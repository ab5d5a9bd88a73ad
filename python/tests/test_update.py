"""Live updates from Python: trellis.update and Store.update, refresh of the store,
retriever and pipeline handles, refusals listed by the library."""

import pytest

import trellis

from conftest import SAMPLE


@pytest.fixture
def kg(tmp_path):
    d = tmp_path / "kg"
    trellis.ingest(d, [SAMPLE])
    return d


def facts_of(answer):
    return {(t["head"], t["relation"], t["tail"]) for p in answer["paths"] for t in p["triples"]}


def test_update_changes_and_handles_move_on_refresh(kg, tmp_path):
    store = trellis.Store(kg)
    retriever = trellis.Retriever(store, "bm25", top=50)
    history = ["I loved Happy Gilmore."]
    before = retriever.retrieve(history)
    assert ("Happy Gilmore", "has_genre", "Golf") in facts_of(before)
    gen = store.generation
    report = trellis.update(
        kg,
        changes=[{"op": "retract", "subject": "Happy Gilmore", "relation": "has_genre", "object": "Golf"}],
        rename={"Adam Sandler": "Adam R. Sandler"},
        alias=[("Adam Sandler", "The Sandman")],
    )
    assert report["counts"]["facts_retracted"] == 1 and report["counts"]["renamed"] == 1
    assert report["generation"] == gen + 1
    # Handles keep their generation until they move.
    assert store.generation == gen
    assert retriever.retrieve(history) == before
    assert retriever.refresh() is True
    assert retriever.refresh() is False
    assert ("Happy Gilmore", "has_genre", "Golf") not in facts_of(retriever.retrieve(history))
    assert store.refresh() is True and store.generation == gen + 1
    found = store.entity("Adam R. Sandler")
    assert found and found[0]["key"] == "Adam Sandler" and "The Sandman" in found[0]["aliases"]
    assert store.entity("Adam Sandler")[0]["matched"] == "key"
    assert store.validate()["problems"] == []


def test_store_update_refreshes_itself_and_refusals_are_listed(kg):
    store = trellis.Store(kg)
    gen = store.generation
    with pytest.raises(trellis.BadInputError) as e:
        store.update(changes=[{"op": "delete_entity", "entity": "Nobody"}, {"op": "add", "subject": "A", "relation": "r", "object": "B"}])
    assert "1 change(s) cannot be applied; nothing was committed" in str(e.value)
    assert 'no entity has the key "Nobody"' in str(e.value)
    assert trellis.Store(kg).generation == gen
    report = store.update(changes=[{"op": "delete_entity", "entity": "Nobody"}, {"op": "add", "subject": "A", "relation": "r", "object": "B"}], on_error="skip")
    assert report["counts"]["applied"] == 1
    assert [s["problem"]["problem"] for s in report["skipped"]] == ["unknown_entity"]
    assert store.generation == gen + 1
    assert store.neighbors("A")[0]["tail"] == "B"
    report = store.update(delete="A")
    assert report["counts"]["entities_deleted"] == 1
    assert store.entity("A") == []


def test_bad_change_dicts_and_arguments(kg):
    with pytest.raises(trellis.BadInputError, match=r'changes\[0\]: op "rename" needs the field "name"'):
        trellis.update(kg, changes=[{"op": "rename", "entity": "X"}])
    with pytest.raises(trellis.BadInputError, match=r'changes\[0\]: unknown op "drop"'):
        trellis.update(kg, changes=[{"op": "drop"}])
    with pytest.raises(trellis.SettingError, match="nothing to change"):
        trellis.update(kg)
    with pytest.raises(TypeError, match="rename is a dict"):
        trellis.update(kg, rename=[1, 2])
    with trellis.Store.open(kg) as writer:
        with pytest.raises(trellis.StoreError, match="holds the store open for writing"):
            trellis.update(writer, delete="Golf")


def test_sources_are_recorded_and_retracted(tmp_path):
    d = tmp_path / "kg"
    a = tmp_path / "a.tsv"
    a.write_text("A\tr\tB\nA\tr\tC\n")
    b = tmp_path / "b.tsv"
    b.write_text("A\tr\tC\n")
    trellis.ingest(d, [a], source="wiki")
    trellis.ingest(d, [b], source="news")
    report = trellis.update(d, retract_source="wiki")
    assert report["counts"]["facts_retracted"] == 1
    store = trellis.Store(d)
    assert [(f["head"], f["tail"]) for f in store.neighbors("A")] == [("A", "C")]
    assert store.stats()["loads"] == 3
    with pytest.raises(trellis.BadInputError, match='no load or update has the source "nobody"'):
        store.update(retract_source=["nobody"], source="fix")


def test_auto_refresh_follows_the_store(kg):
    history = ["I loved Happy Gilmore."]
    auto = trellis.Retriever(kg, "bm25", top=50, refresh="auto")
    manual = trellis.Retriever(kg, "bm25", top=50)
    fact = ("Happy Gilmore", "has_genre", "Golf")
    assert fact in facts_of(auto.retrieve(history)) and fact in facts_of(manual.retrieve(history))
    trellis.update(kg, changes=[{"op": "retract", "subject": fact[0], "relation": fact[1], "object": fact[2]}])
    assert fact not in facts_of(auto.retrieve(history))
    assert fact in facts_of(manual.retrieve(history))
    with pytest.raises(trellis.SettingError, match="refresh policy"):
        trellis.Retriever(kg, "bm25", refresh="sometimes")
