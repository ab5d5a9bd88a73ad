"""Store, ingest and index_tokens, checked against the sample file read with plain Python."""

import csv
import pytest

import trellis
from conftest import SAMPLE, run_cli


def sample_facts():
    """The sample's facts as the format defines them: tab-separated head, relation, tail;
    a relation starting with ~ is stored reversed; duplicates once."""
    facts = set()
    with open(SAMPLE, encoding="utf-8") as f:
        for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            h, r, t = row
            facts.add((t, r[1:], h) if r.startswith("~") else (h, r, t))
    return facts


def test_ingest_report_counts_what_the_file_holds(tmp_path):
    facts = sample_facts()
    seen = []
    report = trellis.ingest(tmp_path / "kg", [str(SAMPLE)], progress=seen.append)
    assert report["facts"] == len(facts)
    assert report["entities"] == len({e for h, _, t in facts for e in (h, t)})
    assert report["relations"] == len({r for _, r, _ in facts})
    with open(SAMPLE, encoding="utf-8") as f:
        assert report["facts_read"] == sum(1 for _ in f)
    assert report["rejected"] == {}
    # Progress reaches the calling thread as dicts of one shape.
    assert seen, "no progress report"
    assert all(p["work"] == "load" and set(p) == {"work", "step", "steps", "stage", "done", "total", "unit", "facts"} for p in seen)
    # The file is read whole before the writing steps.
    reading = [p for p in seen if p["unit"] == "bytes"]
    assert reading and reading[-1]["done"] == reading[-1]["total"] == SAMPLE.stat().st_size


def test_stats_entity_and_neighbors(store, store_dir):
    facts = sample_facts()
    stats = store.stats()
    assert stats["facts"] == len(facts) == store.stats()["facts"]
    assert stats["entities"] == store.entity_count
    assert [t["name"] for t in stats["token_indexes"]] == ["tokenizer.json"]
    found = store.entity("jordan spieth")
    assert [e["name"] for e in found] == ["Jordan Spieth"]
    e = found[0]
    assert e["matched"] == "name"
    assert e["out_degree"] == sum(1 for h, _, _ in facts if h == "Jordan Spieth")
    assert e["in_degree"] == sum(1 for _, _, t in facts if t == "Jordan Spieth")
    assert store.entity(e["id"])[0]["key"] == "Jordan Spieth"
    assert store.entity(f"#{e['id']}")[0]["matched"] == "id"
    assert store.entity("no such entity anywhere") == []
    # One hop: every fact touching the entity, in stored orientation, `reverse` for facts
    # that point at it.
    rows = store.neighbors("Jordan Spieth", limit=1000)
    got = {(r["head"], r["relation"], r["tail"]) for r in rows}
    assert got == {f for f in facts if "Jordan Spieth" in (f[0], f[2])}
    assert all(r["reverse"] == (r["tail"] == "Jordan Spieth") and r["hop"] == 1 for r in rows)
    golf = store.neighbors("Jordan Spieth", relation="Sport played", hops=2, limit=1000)
    assert {(r["head"], r["relation"], r["tail"]) for r in golf if r["hop"] == 1} == {("Jordan Spieth", "Sport played", "Golf")}
    assert {(r["head"], r["relation"], r["tail"]) for r in golf if r["hop"] == 2} == {f for f in facts if "Golf" in (f[0], f[2])} - {
        ("Jordan Spieth", "Sport played", "Golf")
    }
    assert len(store.neighbors("Golf", limit=5)) == 5


def test_neighbors_as_the_command_line_lists_them(store, store_dir, trellis_bin):
    import json

    cli = [json.loads(line) for line in run_cli(trellis_bin, "neighbors", "--store", store_dir, "Golf", "--hops", "2", "--limit", "50", "--json").splitlines()]
    ours = [{k: v for k, v in r.items() if k != "start"} for r in store.neighbors("Golf", hops=2, limit=50)]
    assert ours == cli


def test_validate_and_modes(store, store_dir):
    report = store.validate()
    assert report["problems"] == []
    assert store.read_only and trellis.Store(store_dir).read_only
    writer = trellis.Store.open(store_dir)
    assert not writer.read_only and writer.stats()["facts"] == store.stats()["facts"]
    del writer


def test_index_tokens_progress(tmp_path):
    from conftest import GSR

    trellis.ingest(tmp_path / "kg", [SAMPLE])
    seen = []
    info = trellis.index_tokens(tmp_path / "kg", GSR / "tokenizer.json", name="gsr", progress=seen.append)
    assert info["name"] == "gsr" and info["linearization"]["name"] == "trellis"
    assert info["entities"] == trellis.Store(tmp_path / "kg").entity_count
    assert seen and all(p["work"] == "index-tokens" and p["unit"] == "names" for p in seen)
    assert seen[-1]["done"] == seen[-1]["total"]


def test_skip_writes_rejects(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tr\tb\nonly two\tcolumns\nc\tr\td\n", encoding="utf-8")
    rejects = tmp_path / "rejects.tsv"
    report = trellis.ingest(tmp_path / "kg", [bad], on_error="skip", rejects=rejects)
    assert report["facts"] == 2 and report["rejected"] == {"wrong_column_count": 1}
    assert "only two" in rejects.read_text(encoding="utf-8")


@pytest.mark.parametrize("bad", [{"memory_mb": 1}, {"memory_mb": 2**200}, {"threads": -1}, {"threads": 2**64}, {"on_error": "ignore"}, {"format": "csv"}])
def test_ingest_settings_refused(tmp_path, bad):
    with pytest.raises(trellis.SettingError):
        trellis.ingest(tmp_path / "kg", [SAMPLE], **bad)
    assert not (tmp_path / "kg").exists()
