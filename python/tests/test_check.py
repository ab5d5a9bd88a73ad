"""The fact check from Python (``trellis.FactChecker``, a pipeline's ``checker``): the same
claims and verdicts as ``trellis check``, on a graph worked by hand."""

import json
import pickle
import subprocess

import pytest

import trellis

from conftest import GENERATOR, REPO

GRAPH = """Mystic River\tdirected_by\tClint Eastwood
Gran Torino\tdirected_by\tClint Eastwood
Into the Wild\tdirected_by\tSean Penn
Mystic River\tstarred_actors\tSean Penn
Milk\tstarred_actors\tSean Penn
Milk\trelease_year\t2008
Mystic River\trelease_year\t2003
"""

CHECKER = {
    "format": 1,
    "task": "fact-check",
    "cues": {"starred_actors": ["starred in"]},
    "relations": {
        "directed_by": {"subjects": 40, "single_object": 40, "objects": 30, "single_subject": 10},
        "release_year": {"subjects": 40, "single_object": 40, "objects": 20, "single_subject": 2},
    },
}


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    d = tmp_path_factory.mktemp("check")
    (d / "g.tsv").write_text(GRAPH)
    trellis.ingest(d / "kg", [d / "g.tsv"])
    (d / "checker.json").write_text(json.dumps(CHECKER))
    return d


def test_claims_and_verdicts_are_the_command_line(graph, trellis_bin):
    checker = trellis.FactChecker(graph / "kg", checker=graph / "checker.json")
    r = checker.check(["Who directed Mystic River?"], "Mystic River was directed by Sean Penn. Sean Penn starred in Milk.")
    assert [(c["subject"]["name"], c["verdict"], c["object"]["name"]) for c in r["claims"]] == [
        ("Mystic River", "refuted", "Sean Penn"),
        ("Sean Penn", "supported", "Milk"),
    ]
    assert r["claims"][0]["evidence"] == [[["Mystic River", "directed_by", "Clint Eastwood"]]]
    assert (r["fact_score"], r["neip"]) == (0.5, 0.0)
    out = subprocess.run(
        [trellis_bin, "check", "--store", graph / "kg", "--checker", graph / "checker.json", "--json",
         "--reply", "Mystic River was directed by Sean Penn. Sean Penn starred in Milk.", "Who directed Mystic River?"],
        capture_output=True, text=True, check=True,
    )
    cli = json.loads(out.stdout)
    del cli["id"]
    assert cli == r
    # Without a checker file nothing is refuted; pickling keeps the checker.
    plain = trellis.FactChecker(graph / "kg")
    assert plain.check([], "Mystic River was directed by Sean Penn.")["claims"][0]["verdict"] == "not_enough_info"
    again = pickle.loads(pickle.dumps(checker))
    assert again.check([], "Milk was released in 2003.")["refuted"] == 1


def test_bad_checkers_and_inputs_raise_the_documented_errors(graph):
    bad = graph / "bad.json"
    bad.write_text('{"format": 1, "task": "query-producer"}')
    with pytest.raises(trellis.ModelError, match="not a fact checker file"):
        trellis.FactChecker(graph / "kg", checker=bad)
    with pytest.raises(trellis.SettingError, match="window"):
        trellis.FactChecker(graph / "kg", window=0)
    checker = trellis.FactChecker(graph / "kg")
    with pytest.raises(TypeError):
        checker.check("not a list", "x")


def test_a_pipeline_checks_its_replies(store):
    pipeline = trellis.Pipeline(store, "pcst", generator=GENERATOR, checker=REPO / "models" / "check-opendialkg", gen_check=3)
    reply = pipeline.respond(["I loved Happy Gilmore.", "Me too, Adam Sandler is so funny. Do you like him?"])
    assert set(reply["fact_check"]) == {"fact_score", "neip", "supported", "refuted", "not_enough_info", "claims"}
    assert len(reply["responses"]) == 3 and all("fact_score" in r for r in reply["responses"])
    # The best supported first: no later sequence has a higher fact score (unjudged counts 0.5).
    key = [0.5 if r["fact_score"] is None else r["fact_score"] for r in reply["responses"]]
    assert key == sorted(key, reverse=True)
    with pytest.raises(trellis.SettingError, match="`gen_check` needs `checker`"):
        trellis.Pipeline(store, "pcst", generator=GENERATOR, gen_check=3)
