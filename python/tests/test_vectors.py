"""The store's vector index from Python: trellis.index_vectors writes the same file as
`trellis index-vectors`, its settings are the library's, and dense retrieval by facts gives
the same answers with the file as without it and as the command line."""

import json
from pathlib import Path

import pytest

import trellis
from conftest import GSR, SAMPLE, read_jsonl, run_cli

BERT = GSR.parents[1] / "tests" / "fixtures" / "encoders" / "bert-mean"
REQUESTS = [
    {"id": "a", "history": ["Do you know anything about Jordan Spieth?"]},
    {"id": "b", "history": ["I love Neil Gaiman's books.", "Which one did you like best?"]},
    {"id": "c", "history": ["Have you seen anything with Meryl Streep or Robert De Niro?"]},
]


@pytest.fixture
def kg(tmp_path):
    d = tmp_path / "kg"
    trellis.ingest(d, [SAMPLE])
    return d


def test_index_vectors_is_the_command_line_and_changes_no_answer(kg, tmp_path, trellis_bin):
    retriever = trellis.Retriever(kg, "dense", dense_model=BERT, dense_paths="facts", top=5)
    without = retriever.retrieve_batch(REQUESTS)
    seen = []
    report = trellis.index_vectors(kg, BERT, progress=seen.append, encoder_batch=4)
    assert report["header"]["dims"] == 32 and report["header"]["facts"] > 1000
    assert seen and seen[-1]["work"] == "index-vectors"
    ours = Path(report["path"]).read_bytes()
    # The command line writes the same bytes (the batch does not change a vector).
    run_cli(trellis_bin, "index-vectors", "--store", kg, "--dense-model", BERT)
    assert Path(report["path"]).read_bytes() == ours
    retriever = trellis.Retriever(kg, "dense", dense_model=BERT, dense_paths="facts", top=5)
    assert retriever.retrieve_batch(REQUESTS) == without
    assert any(a["paths"] for a in without)
    inp, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in REQUESTS), encoding="utf-8")
    run_cli(trellis_bin, "retrieve", "--store", kg, "--input", inp, "--output", out, "--retriever", "dense",
            "--dense-model", BERT, "--dense-paths", "facts", "--top", "5")
    assert [{k: v for k, v in a.items() if k != "line"} for a in read_jsonl(out)] == without


def test_index_vectors_settings_are_checked(kg):
    with pytest.raises(trellis.SettingError, match="encoder_batch must be within"):
        trellis.index_vectors(kg, BERT, encoder_batch=0)
    with pytest.raises(trellis.SettingError, match="unknown setting `dense_paths` for a vector index"):
        trellis.index_vectors(kg, BERT, dense_paths="facts")
    with pytest.raises(trellis.SettingError, match="unknown dense paths"):
        trellis.Retriever(kg, "dense", dense_model=BERT, dense_paths="fact")
    with pytest.raises(trellis.SettingError, match="`dense_paths` does not apply to the pcst retriever"):
        trellis.Retriever(kg, "pcst", pcst_scores="dense", dense_model=BERT, dense_paths="facts")
    with pytest.raises(trellis.ModelError):
        trellis.index_vectors(kg, GSR)
