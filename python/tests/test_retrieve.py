"""Linker, Retriever and evaluate_retrieval, against the command line's answers."""

import json

import pytest

import trellis
from conftest import GSR, read_jsonl, run_cli


def test_link_text_and_dialog(store):
    linker = trellis.Linker(store)
    text = "Do you know anything about Jordan Spieth? I loved Happy Gilmore."
    mentions = linker.link(text)
    assert [m["text"] for m in mentions] == ["Jordan Spieth", "Happy Gilmore"]
    for m in mentions:
        # Character offsets index the Python string; byte offsets its UTF-8.
        assert text[m["char_start"] : m["char_end"]] == m["text"]
        assert text.encode()[m["start"] : m["end"]].decode() == m["text"]
        assert m["entities"][0]["name"] == m["text"]
    # In a dialog, a word of a name linked earlier links too ("Spieth").
    dialog = linker.link([{"speaker": "user", "text": "Jordan Spieth is great"}, "Spieth won again"])
    assert [(m["message"], m["text"], m["kind"]) for m in dialog] == [(0, "Jordan Spieth", "name"), (1, "Spieth", "partial_name")]
    assert dialog[0]["speaker"] == "user"
    # Options are checked against their ranges.
    with pytest.raises(trellis.SettingError):
        trellis.Linker(store, window=0)
    # An unknown name is a SettingError naming it, as every other setting problem.
    with pytest.raises(trellis.SettingError, match="unknown setting `no_such_option` for a linker"):
        trellis.Linker(store, no_such_option=1)


def cli_answers(trellis_bin, store_dir, requests, tmp_path, *args):
    inp, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
    run_cli(trellis_bin, "retrieve", "--store", store_dir, "--input", inp, "--output", out, *args)
    return [{k: v for k, v in a.items() if k != "line"} for a in read_jsonl(out)]


@pytest.mark.parametrize("kind", ["pcst", "bm25", "gsr"])
def test_retrieve_batch_is_the_command_line(store, store_dir, trellis_bin, dev_requests, tmp_path, kind):
    model = GSR if kind == "gsr" else None
    requests = [{"id": r["id"], "history": r["history"]} for r in dev_requests]
    extra = ["--model", model] if model else []
    cli = cli_answers(trellis_bin, store_dir, requests, tmp_path, "--retriever", kind, "--top", "5", *extra)
    retriever = trellis.Retriever(store, kind, model=model, top=5)
    ours = retriever.retrieve_batch(requests)
    assert ours == cli
    # One at a time: the same paths, no "id".
    for r, a in list(zip(requests, cli))[:5]:
        single = retriever.retrieve(r["history"])
        assert single == {k: v for k, v in a.items() if k != "id"}


ENCODERS = GSR.parents[1] / "tests" / "fixtures" / "encoders"


@pytest.mark.parametrize(
    "kind,options,flags",
    [
        ("dense", {"dense_model": ENCODERS / "bert-mean"}, ["--dense-model", ENCODERS / "bert-mean"]),
        ("pcst", {"pcst_scores": "dense", "dense_model": ENCODERS / "t5-mean"}, ["--pcst-scores", "dense", "--dense-model", ENCODERS / "t5-mean"]),
        ("surge", {"surge_model": ENCODERS / "subgraph"}, ["--surge-model", ENCODERS / "subgraph"]),
        (
            "surge",
            {"surge_model": ENCODERS / "subgraph", "rewrite": True, "rewrite_input": "surge"},
            ["--surge-model", ENCODERS / "subgraph", "--rewrite", "--rewrite-input", "surge"],
        ),
        (
            "bm25",
            {"rerank": ENCODERS / "cross", "rerank_pool": ["pcst", "dense"], "rerank_top": 4, "dense_model": ENCODERS / "bert-cls"},
            ["--rerank", ENCODERS / "cross", "--rerank-pool", "pcst,dense", "--rerank-top", "4", "--dense-model", ENCODERS / "bert-cls"],
        ),
        (
            "bm25",
            {"rerank": ENCODERS / "cross", "rerank_pool": ["pcst"], "rerank_fusion": 0.25},
            ["--rerank", ENCODERS / "cross", "--rerank-pool", "pcst", "--rerank-fusion", "0.25"],
        ),
    ],
)
def test_encoder_retrievers_are_the_command_line(store, store_dir, trellis_bin, dev_requests, tmp_path, kind, options, flags):
    """Dense retrieval, PCST's dense prizes, SURGE and a reranked pool (tiny fixture models):
    the same answers from Python as from `trellis retrieve`."""
    requests = [{"id": r["id"], "history": r["history"]} for r in dev_requests[:40]]
    cli = cli_answers(trellis_bin, store_dir, requests, tmp_path, "--retriever", kind, "--top", "6", *flags)
    ours = trellis.Retriever(store, kind, top=6, **options).retrieve_batch(requests)
    assert ours == cli
    assert any(a["paths"] for a in ours)


def test_encoder_options_are_checked(store):
    with pytest.raises(trellis.SettingError, match="`dense_model` does not apply to the bm25 retriever"):
        trellis.Retriever(store, "bm25", dense_model=ENCODERS / "bert-mean")
    with pytest.raises(trellis.SettingError, match="`rerank_pool` needs `rerank`"):
        trellis.Retriever(store, "bm25", rerank_pool=["pcst"])
    with pytest.raises(trellis.SettingError, match="`rerank_fusion` needs `rerank`"):
        trellis.Retriever(store, "bm25", rerank_fusion=1.0)
    with pytest.raises(trellis.SettingError, match="`rewrite_input` needs `rewrite`"):
        trellis.Retriever(store, "bm25", rewrite_input="bm25")
    with pytest.raises(trellis.SettingError, match="rerank_fusion"):
        trellis.Retriever(store, "bm25", rerank=ENCODERS / "cross", rerank_fusion=-1.0)
    with pytest.raises(trellis.SettingError, match="unknown retriever"):
        trellis.Retriever(store, "bm25", rerank=ENCODERS / "cross", rerank_pool=["bm26"])
    with pytest.raises(trellis.SettingError, match="for retrievers with a model"):
        trellis.Retriever(store, "bm25", device="cpu")
    with pytest.raises(trellis.SettingError, match="needs `surge_model`"):
        trellis.Retriever(store, "surge")
    with pytest.raises(trellis.SettingError, match="`surge_model` does not apply to the dense retriever"):
        trellis.Retriever(store, "dense", dense_model=ENCODERS / "bert-mean", surge_model=ENCODERS / "subgraph")
    # A bi-encoder given as the reranker: the model's own error, naming its trellis.json.
    with pytest.raises(trellis.ModelError, match="cross-encoder"):
        trellis.Retriever(store, "bm25", rerank=ENCODERS / "bert-mean")


def test_retrieve_options_and_entities(store):
    r = trellis.Retriever(store, "pcst", pcst_variant="g-retriever", bm25_turns=2)
    assert r.kind == "pcst" and r.model is None and r.batch_size == 1
    answer = r.retrieve(["hello there"], entities=["Golf"], top=2)
    assert answer["mentioned"] == ["Golf"] and len(answer["paths"]) <= 2
    with pytest.raises(trellis.BadInputError, match="no entity with key"):
        r.retrieve(["hi"], entities=["No Such Entity"])
    with pytest.raises(trellis.SettingError):
        trellis.Retriever(store, "bm25", top=0)
    with pytest.raises(trellis.SettingError, match="unknown retriever"):
        trellis.Retriever(store, "sparse")
    with pytest.raises(trellis.SettingError, match="needs `dense_model`"):
        trellis.Retriever(store, "dense")
    with pytest.raises(trellis.SettingError, match="needs `model`"):
        trellis.Retriever(store, "gsr")
    with pytest.raises(trellis.SettingError, match="prior"):
        trellis.Retriever(store, "gsr", model=GSR, prior="strong")


def test_retrieve_batch_bad_requests(store):
    r = trellis.Retriever(store, "bm25", top=1)
    batch = [["Jordan Spieth"], {"id": "x", "history": [{"speaker": 3, "text": "bad"}]}, {"id": "y", "history": ["Golf"]}]
    with pytest.raises(trellis.BadInputError, match=r"request 1: history\[0\] has a \"speaker\""):
        r.retrieve_batch(batch)
    # Skipped, and said which and why, as the command line reports a skipped line.
    with pytest.warns(trellis.errors.SkippedRequestWarning, match=r"^request 1: history\[0\] has a \"speaker\".* \(skipped\)$"):
        out = r.retrieve_batch(batch, on_error="skip")
    assert out[1] is None and out[2]["id"] == "y" and "id" not in out[0]
    # The error policy names of ingest and the command line's --on-error, nothing else.
    with pytest.raises(trellis.SettingError, match=r"on_error: .*\"raise\""):
        r.retrieve_batch(batch, on_error="raise")
    with pytest.raises(TypeError):
        r.retrieve("a string is not a history")


def test_evaluate_retrieval_is_the_command_line(store, store_dir, trellis_bin, dev_csv):
    cli = json.loads(run_cli(trellis_bin, "eval", "retrieval", "--store", store_dir, "--input", dev_csv, "--retriever", "pcst", "--max-turns", "80", "--json"))
    seen = []
    ours = trellis.evaluate_retrieval(trellis.Retriever(store, "pcst"), dev_csv, max_turns=80, progress=seen.append)
    assert seen and seen[-1]["work"] == "evaluate" and seen[-1]["unit"] == "turns"
    timing = {"latency_ms_p50", "latency_ms_p99", "turns_per_s"}
    assert {k: v for k, v in ours.items() if k not in timing} == {k: v for k, v in cli.items() if k not in timing}
    assert ours["turns"] == 80
    with pytest.raises(trellis.StoreError):
        trellis.evaluate_retrieval(trellis.Retriever(store, "pcst"), dev_csv.parent / "missing.csv")


def test_a_batch_as_an_arrow_table(store, dev_requests):
    pyarrow = pytest.importorskip("pyarrow")
    retriever = trellis.Retriever(store, "pcst", top=3)
    requests = dev_requests[:20] + [{"id": "bad", "history": [{"speaker": 3, "text": "bad"}]}]
    with pytest.warns(trellis.errors.SkippedRequestWarning, match=r"^request 20: "):
        answers = retriever.retrieve_batch(requests, on_error="skip")
    assert answers[-1] is None, "the bad request is skipped"
    table = trellis.arrow.table(answers)
    assert isinstance(table, pyarrow.Table)
    # One row per request, in order; the skipped one a row of nulls; nested paths kept.
    assert table.num_rows == len(requests)
    assert table.to_pylist()[:-1] == answers[:-1]
    assert all(v is None for v in table.to_pylist()[-1].values())
    assert table.column("id").to_pylist()[:-1] == [a["id"] for a in answers[:-1]]
    assert trellis.arrow.table([]).num_rows == 0
