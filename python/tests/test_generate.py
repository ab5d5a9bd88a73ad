"""Generator and Pipeline, against the command line's replies."""

import json

import pytest

import trellis
from conftest import GENERATOR, GSR, read_jsonl, run_cli

HISTORY = ["I loved Happy Gilmore.", "Me too, Adam Sandler is so funny. Do you like him?"]


def test_pipeline_respond_is_the_command_line(store, store_dir, trellis_bin):
    cli = json.loads(run_cli(trellis_bin, "respond", "--store", store_dir, "--retriever", "gsr", "--model", GSR, "--generator", GENERATOR, "--json", *HISTORY))
    pipeline = trellis.Pipeline(store, "gsr", model=GSR, generator=GENERATOR)
    ours = pipeline.respond(HISTORY)
    strip = lambda a: {k: v for k, v in a.items() if k not in ("timings", "id")}  # noqa: E731
    assert strip(ours) == strip(cli)
    assert ours["response"] and ours["timings"]["batch"] == 1


def test_respond_batch_and_generate_are_the_command_line(store, store_dir, trellis_bin, dev_requests, tmp_path):
    requests = [{"id": r["id"], "history": r["history"]} for r in dev_requests[:12]]
    # Given knowledge for one, none for another: the generator alone.
    requests[1]["knowledge"] = [[["Jordan Spieth", "Sport played", "Golf"]]]
    requests[2]["knowledge"] = []
    inp, out = tmp_path / "req.jsonl", tmp_path / "out.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
    run_cli(trellis_bin, "run", "--store", store_dir, "--retriever", "pcst", "--generator", GENERATOR, "--input", inp, "--output", out)
    cli = read_jsonl(out)
    pipeline = trellis.Pipeline(store, "pcst", generator=GENERATOR, batch=4)
    ours = pipeline.respond_batch(requests)
    strip = lambda a: {k: v for k, v in a.items() if k not in ("timings", "line")}  # noqa: E731
    assert [strip(a) for a in ours] == [strip(a) for a in cli]
    # The generator on its own, given the knowledge the pipeline read, writes the same.
    generator = trellis.Generator(GENERATOR)
    for r, a in zip(requests[:4], cli):
        g = generator.generate(r["history"], knowledge=a["knowledge"])
        assert g["text"] == a["response"] and g["finish"] in ("eos", "stop", "length")
    batch = generator.generate_batch([{"history": r["history"], "knowledge": a["knowledge"]} for r, a in zip(requests, cli)])
    assert [g["text"] for g in batch] == [a["response"] for a in cli]


def test_generator_settings(store):
    beam = trellis.Generator(GENERATOR, strategy="beam", beams=3, return_sequences=2, max_new_tokens=8)
    out = beam.generate(HISTORY, knowledge=[[["Adam Sandler", "is-a", "Writer"]]])
    assert len(out["responses"]) == 2 and out["text"] == out["responses"][0]["text"]
    assert all(len(r["tokens"]) <= 8 for r in out["responses"])
    with pytest.raises(trellis.SettingError):
        trellis.Generator(GENERATOR, strategy="greedy", beams=2)  # beam settings for greedy search
    with pytest.raises(trellis.SettingError):
        trellis.Generator(GENERATOR, strategy="beam", beams=0)
    with pytest.raises(trellis.BadInputError, match="knowledge"):
        trellis.Generator(GENERATOR).generate(HISTORY, knowledge=[[["A", "r", "B"], ["C", "s", "D"]]])
    with pytest.raises(trellis.SettingError, match="generator"):
        trellis.Pipeline(store, "pcst")
