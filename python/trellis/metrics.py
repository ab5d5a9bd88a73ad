"""Response metrics, computed as the named Python references compute them (the library's
``trellis::eval::responses``; ``trellis eval responses`` prints the same figures).

Every score is a fraction in 0..1. ``score`` returns them all; the others pick one.
"""

from typing import Any, Dict, List, Optional, Sequence

from . import _trellis

__all__ = ["score", "bleu", "rouge", "f1", "kf1", "distinct"]


def score(
    predictions: Sequence[str],
    references: Sequence[str],
    knowledge: Optional[Sequence[Optional[str]]] = None,
    entities: Optional[Sequence[Optional[List[str]]]] = None,
) -> Dict[str, Any]:
    """Every metric of ``trellis eval responses`` as a dict: ``bleu_sacrebleu``,
    ``bleu_nltk``, ``bleu_dialoggsr`` (each ``{"1".."4"}``), ``rouge``, ``rouge_stemmed``
    (``{"rouge1", "rouge2", "rougeL"}``), ``f1``, ``kf1`` (None without knowledge),
    ``distinct_1``, ``distinct_2``, ``distinct_replies``, ``grounding``.

    ``knowledge``: per prediction, the knowledge text it should be grounded in (for KF1);
    ``entities``: per prediction, the names of that knowledge's entities (for grounding).
    """
    return _trellis._score(list(predictions), list(references), None if knowledge is None else list(knowledge), None if entities is None else list(entities))


def bleu(predictions: Sequence[str], references: Sequence[str], n: int = 4, kind: str = "sacrebleu") -> float:
    """Corpus BLEU-``n`` (1..4) of ``kind``: ``"sacrebleu"`` (sacrebleu's default),
    ``"nltk"`` (nltk's corpus_bleu, no smoothing, lowercased) or ``"dialoggsr"`` (the
    DialogGSR authors' code), as a fraction (sacrebleu prints 100 times it)."""
    if kind not in ("sacrebleu", "nltk", "dialoggsr"):
        raise ValueError(f"kind must be 'sacrebleu', 'nltk' or 'dialoggsr', not {kind!r}")
    if n not in (1, 2, 3, 4):
        raise ValueError(f"n must be 1, 2, 3 or 4, not {n!r}")
    return score(predictions, references)[f"bleu_{kind}"][str(n)]


def rouge(predictions: Sequence[str], references: Sequence[str], stemmed: bool = False) -> Dict[str, float]:
    """Mean ROUGE-1, ROUGE-2 and ROUGE-L F-measures (rouge-score's), ``{"rouge1", "rouge2",
    "rougeL"}``; ``stemmed`` uses the Porter stemmer."""
    return score(predictions, references)["rouge_stemmed" if stemmed else "rouge"]


def f1(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Mean unigram F1 after SQuAD's normalization."""
    return score(predictions, references)["f1"]


def kf1(predictions: Sequence[str], knowledge: Sequence[Optional[str]]) -> Optional[float]:
    """Mean unigram F1 of each prediction against its knowledge text, over the predictions
    with knowledge (None when none has any)."""
    return score(predictions, [""] * len(predictions), knowledge=knowledge)["kf1"]


def distinct(predictions: Sequence[str]) -> Dict[str, float]:
    """``{"distinct_1", "distinct_2"}``: distinct n-grams over all n-grams of the
    predictions."""
    s = score(predictions, [""] * len(predictions))
    return {"distinct_1": s["distinct_1"], "distinct_2": s["distinct_2"]}
