"""The text index from Python: trellis.index_text, Store.search (the same hits as
`trellis search --json`), its refusals, and an update the index follows."""

import json
import subprocess

import pytest

import trellis

from conftest import REPO, SAMPLE


@pytest.fixture
def kg(tmp_path):
    d = tmp_path / "kg"
    trellis.ingest(d, [SAMPLE])
    return d


def test_search_needs_the_index_and_finds_misspelt_names(kg, trellis_bin):
    store = trellis.Store(kg)
    with pytest.raises(trellis.StoreError, match="index-text"):
        store.search("Adam Sandler")
    store.close()
    seen = []
    report = trellis.index_text(kg, progress=seen.append)
    assert report["documents"] > 100 and report["record"]["format"] == 2
    assert seen and seen[-1]["work"] == "index-text"
    store = trellis.Store(kg)
    hits = store.search("Adam Sandlr", top=3)
    assert hits[0]["name"] == "Adam Sandler" and hits[0]["rank"] == 1
    # The same answer as the command line's.
    cli = json.loads(subprocess.run([str(trellis_bin), "search", "--store", str(kg), "Adam Sandlr", "--top", "3", "--json"], check=True, capture_output=True, text=True).stdout)
    assert [h["entity"] for h in hits] == [h["entity"] for h in cli["hits"]]
    assert [h["matched_facts"] for h in hits] == [h["matched_facts"] for h in cli["hits"]]
    assert all(h["name"] != "Happy Gilmore" for h in store.search("gilmor", exact=True))


def test_search_refusals(kg):
    trellis.index_text(kg)
    store = trellis.Store(kg)
    with pytest.raises(trellis.SettingError, match="top"):
        store.search("Adam", top=0)
    with pytest.raises(trellis.BadInputError, match="nothing to search for"):
        store.search("?!")


def test_updates_keep_the_index_current(kg):
    trellis.index_text(kg)
    trellis.update(kg, changes=[{"op": "add", "subject": "Quillon Verbatim", "relation": "wrote", "object": "Happy Gilmore"}])
    store = trellis.Store(kg)
    assert store.search("Quillon", top=1)[0]["name"] == "Quillon Verbatim"


def test_the_search_retriever_from_python(kg, tmp_path):
    trellis.index_text(kg)
    store = trellis.Store(kg)
    with pytest.raises(trellis.SettingError, match="search_producer"):
        trellis.Retriever(store, "search")
    retriever = trellis.Retriever(store, "search", search_producer=str(REPO / "models" / "query-producer-opendialkg"), top=5)
    answer = retriever.retrieve(["I loved Happy Gilmore.", "Do you like golf?"])
    paths = answer["paths"]
    assert len(paths) == 5
    assert all(p["explanation"].startswith("search: a fact of a found entity, query ") for p in paths)
    with pytest.raises(trellis.SettingError, match="search_queries"):
        trellis.Retriever(store, "search", search_producer="tfidf", search_queries=0)


def test_documents_join_the_entities_their_titles_name(tmp_path):
    wow = REPO / "tests" / "fixtures" / "wow"
    kg = tmp_path / "wow"
    trellis.ingest(kg, [wow / "kg.tsv"])
    # Brakebills (line 6) names no entity: refused with its line, nothing committed.
    with pytest.raises(trellis.BadInputError, match="Brakebills") as caught:
        trellis.index_text(kg, documents=wow / "documents.jsonl")
    assert caught.value.line == 6 and caught.value.path.endswith("documents.jsonl")
    report = trellis.index_text(kg, documents=wow / "documents.jsonl", on_error="skip")
    assert report["texts"] == {"read": 6, "matched": 5, "skipped": 1}
    with trellis.Store(kg) as store:
        hit = store.search("secret college", top=1)[0]
        assert hit["name"] == "The Magicians" and hit["text"].startswith("The Magicians is a fantasy novel")
        assert "text" not in store.search("Fantasy", top=1, exact=True)[0]
    with pytest.raises(trellis.SettingError):
        trellis.index_text(kg, documents=wow / "documents.jsonl", on_error="ignore")
