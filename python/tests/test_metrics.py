"""The response metrics against the Python references' figures (sacrebleu, nltk,
rouge-score), committed by tools/reference/metrics.py."""

import json

import pytest

import trellis
from conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "metrics"


def test_every_metric_matches_the_references():
    ref = json.loads((FIXTURES / "reference.json").read_text(encoding="utf-8"))["opendialkg"]["scores"]
    pairs = [json.loads(line) for line in (FIXTURES / "pairs.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    preds, refs = [p["prediction"] for p in pairs], [p["reference"] for p in pairs]
    knowledge, entities = [p.get("knowledge") for p in pairs], [p.get("entities") for p in pairs]
    scores = trellis.metrics.score(preds, refs, knowledge=knowledge, entities=entities)

    def close(a, b):
        if isinstance(b, dict):
            assert set(a) >= set(b)
            for k in b:
                close(a[k], b[k])
        elif isinstance(b, float):
            assert a == pytest.approx(b, rel=1e-12, abs=1e-12)
        else:
            assert a == b

    close(scores, ref)
    for kind in ("sacrebleu", "nltk", "dialoggsr"):
        for n in (1, 2, 3, 4):
            assert trellis.metrics.bleu(preds, refs, n=n, kind=kind) == pytest.approx(ref[f"bleu_{kind}"][str(n)], rel=1e-12)
    assert trellis.metrics.rouge(preds, refs) == pytest.approx(ref["rouge"], rel=1e-12)
    assert trellis.metrics.rouge(preds, refs, stemmed=True) == pytest.approx(ref["rouge_stemmed"], rel=1e-12)
    assert trellis.metrics.f1(preds, refs) == pytest.approx(ref["f1"], rel=1e-12)
    assert trellis.metrics.kf1(preds, knowledge) == pytest.approx(ref["kf1"], rel=1e-12)
    assert trellis.metrics.distinct(preds) == pytest.approx({"distinct_1": ref["distinct_1"], "distinct_2": ref["distinct_2"]}, rel=1e-12)


def test_metrics_refuse_bad_input():
    with pytest.raises(trellis.BadInputError):
        trellis.metrics.score([], [])
    with pytest.raises(trellis.BadInputError):
        trellis.metrics.score(["a"], ["a", "b"])
    with pytest.raises(ValueError):
        trellis.metrics.bleu(["a"], ["a"], n=5)
    assert trellis.metrics.kf1(["a"], [None]) is None
