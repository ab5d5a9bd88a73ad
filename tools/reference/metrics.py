#!/usr/bin/env python3
"""Reference values of the response metrics (`trellis::eval::responses`), from the Python
libraries the Rust code must agree with, for tests/integration/metrics.rs.

    PY=$(bash tools/venv.sh metrics)
    $PY tools/reference/metrics.py --force      # rewrites tests/fixtures/metrics/{pairs.jsonl,reference.json,porter.tsv}
    $PY tools/reference/metrics.py --out /tmp/m # writes elsewhere (to compare)

The committed references are frozen: without `--force` it refuses to write over them.

Pairs (OpenDialKG dev, in file order, the first MAX_PAIRS): every assistant chat message is a
prediction, scored against the chat message just before it (the reference); its knowledge is
the most recent action path earlier in the dialog, its triples written "s r o" and joined by
spaces, or "" when the dialog has had none yet.

Every score is a fraction in 0..1 (sacrebleu's own 0..100 BLEU is divided by 100; the raw
value is kept beside it as `sacrebleu_raw`):

- bleu_sacrebleu."n": sacrebleu's default BLEU, `BLEU(max_ngram_order=n)` (tokenizer 13a,
  smooth_method "exp", mixed case, effective_order False), corpus_score / 100.
- bleu_nltk."n": nltk `corpus_bleu` with weights (1/n, ..., 1/n), no smoothing (method0), on
  `text.lower().split()` tokens; what it returns, warnings silenced.
- rouge / rouge_stemmed: rouge-score `RougeScorer(["rouge1", "rouge2", "rougeL"],
  use_stemmer=False / True)`, `score(reference, prediction)`, F-measure, mean over pairs.
- f1: unigram F1 of SQuAD-normalized text (below), mean over pairs; 0 when nothing overlaps
  (both empty included).
- kf1: the same F1 of the prediction against the knowledge, mean over the pairs whose knowledge
  is a non-empty string (null when there is none); kf1_pairs counts them.
- distinct_1 / distinct_2: distinct n-grams / all n-grams over every prediction, tokens
  `text.lower().split()`, n-grams within one prediction; 0 when there are no n-grams.

Also an "edge" corpus of hand-written pairs (empty text, whitespace, unicode, tokenizer corners)
scored as one corpus and pair by pair, and porter.tsv: NLTK PorterStemmer (NLTK_EXTENSIONS)
stems of every rouge token of the pairs and of hand-picked words that reach each rule.
"""
import argparse
import csv
import json
import platform
import re
import string
import sys
import warnings
from collections import Counter
from importlib import metadata
from pathlib import Path

from nltk.stem.porter import PorterStemmer
from nltk.translate.bleu_score import corpus_bleu
from rouge_score import rouge_scorer
from rouge_score import tokenize as rouge_tokenize
from sacrebleu.metrics import BLEU

MAX_PAIRS = 1200
ROOT = Path(__file__).resolve().parents[2]


def opendialkg_pairs(path, limit):
    csv.field_size_limit(1 << 30)
    pairs = []
    with open(path, newline="", encoding="utf-8") as f:
        for row_i, row in enumerate(csv.DictReader(f)):
            last_chat = None
            knowledge = ""
            for k, m in enumerate(json.loads(row["Messages"])):
                if m.get("type") == "action":
                    p = (m.get("metadata") or {}).get("path")
                    if p and len(p) > 1 and p[1]:
                        knowledge = " ".join(" ".join(t) for t in p[1])
                elif m.get("type") == "chat":
                    if m.get("sender") == "assistant" and last_chat is not None:
                        pairs.append({"id": f"dev-{row_i}-{k}", "prediction": m["message"], "reference": last_chat, "knowledge": knowledge})
                        if len(pairs) == limit:
                            return pairs
                    last_chat = m["message"]
    return pairs


# Hand-written pairs: (prediction, reference, knowledge or None).
EDGE = [
    ("", "", None),
    ("", "hello world", ""),
    ("hello world", "", "hello"),
    ("   ", "\t\n ", "  "),
    ("The the the the", "the cat", None),
    ("a an the A The An", "the", "an"),
    ("Hello world", "Hello world", "hello world"),
    ("It costs $3.50, or 3,000 yen... e.g. U.S.A. 1-2 &amp; &lt;b&gt; 5- x-\ny", "It costs 3.50$ , e.g. U.S.A. 1 - 2 & <b> &quot;ok&quot;", "costs"),
    ("don't stop-believing!!! (really) [sic] {x} a/b a\\b ~tilde^ `tick` _under_", "Don't stop believing... really?", "believing"),
    ("<skipped> text,with,commas.and.periods 2.5,3,4 .5 5. ,6", "text with commas and periods 2.5 3 4", None),
    ("Café crème brûlée — “the” best!", "café creme brulee - the best", "Crème brûlée"),
    ("ΟΔΟΣ İstanbul STRASSE straße", "οδος istanbul strasse", "Οδός"),
    ("x\x1cy\u00a0z\u3000w\u2028v tab\there", "x y z w v tab here", "x"),
    ("I ❤️ NY 🗽 the🗽 a’s an—b the\u0301 a\u0363 Ⓐthe the_x", "i love ny the a s an b", "ny"),
    ("generalization relational conditional happiness running flies dying skies news innings", "generalize relate condition happy run fly die sky new inning", "generalization"),
    ("controlling hopefulness electricity feudalism formalize sensibility agreed plastered motoring", "control hopeful electric feudal formal sensible agree plaster motor", ""),
    ("1990s 2,000 3.14 4-5 10-", "1990 2000 3 14 4 5", "1990s"),
    ("Same same same. Same!", "same", "same same"),
    ("one two three four five six", "one two three four five six seven eight", "two four six"),
    ("one two three four", "four three two one", None),
]

# Words that reach each Porter rule and NLTK's special cases.
PORTER_WORDS = """
caresses ponies ties caress cats dies flies spies cries ties lies skies sky news innings inning
outings outing cannings canning howe proceed exceed succeed dying lying tying feed agreed
plastered bled motoring sing conflated troubled sized hopping tanned falling hissing fizzed
failing filing died spied cried happy sky enjoy spy fly try relational conditional rational
valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli
vietnamization predication operator feudalism decisiveness hopefulness callousness formaliti
sensitiviti sensibiliti generalli fulli archaeologi geologi theologi triplicate formative
formalize electriciti electrical hopeful goodness revival allowance inference airliner
gyroscopic adjustable defensible irritant replacement adjustment dependent adoption homologou
communism activate angulariti homologous effective bowdlerize probate rate cease controll roll
yyyy yyyyy syzygy toy ivy oats trees trouble troubles private oaten orrery
a an is as us the this ies ied eed sses ing ed y ys yes yed ying
abbreviation abilities ability aboard abolished abundance accommodation accountability
accordingly agreement allied alliance bowling calling capitalization carefully centralization
characterization civilization committees communication conditionally consolidating
decreased deeply dialogue disgusting electrically emotionally eventually excitement
fulfilling generously graciously happiness hopelessly independently initially
knowledgeable luckily meaningfulness misunderstanding nationalization naturally
objectively operationally organizations possibilities privatization probably rationalization
rationally really recognizable relationally sensationalism specifically successfully
traditionally ultimately understanding universally unnecessarily usefulness
1990s 2000 mp3 b2b 3d h2o 4x4 abc123 x1y2z3
"""


def squad_normalize(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def unigram_f1(prediction, reference):
    p = squad_normalize(prediction).split()
    g = squad_normalize(reference).split()
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    precision = same / len(p)
    recall = same / len(g)
    return 2 * precision * recall / (precision + recall)


def distinct(predictions, n):
    seen = set()
    total = 0
    for text in predictions:
        tokens = text.lower().split()
        grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
        total += len(grams)
        seen.update(grams)
    return len(seen) / total if total else 0.0


def mean(values):
    return sum(values) / len(values)


def scores(pairs):
    preds = [p["prediction"] for p in pairs]
    refs = [p["reference"] for p in pairs]
    out = {"pairs": len(pairs)}
    raw = {}
    out["bleu_sacrebleu"] = {}
    for n in range(1, 5):
        s = BLEU(max_ngram_order=n).corpus_score(preds, [refs]).score
        raw[str(n)] = s
        out["bleu_sacrebleu"][str(n)] = s / 100
    pred_tok = [p.lower().split() for p in preds]
    ref_tok = [[r.lower().split()] for r in refs]
    out["bleu_nltk"] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in range(1, 5):
            out["bleu_nltk"][str(n)] = float(corpus_bleu(ref_tok, pred_tok, weights=(1 / n,) * n))
    for key, stem in (("rouge", False), ("rouge_stemmed", True)):
        scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=stem)
        per = [scorer.score(r, p) for p, r in zip(preds, refs)]
        out[key] = {t: mean([s[t].fmeasure for s in per]) for t in ("rouge1", "rouge2", "rougeL")}
    out["f1"] = mean([unigram_f1(p, r) for p, r in zip(preds, refs)])
    grounded = [p for p in pairs if p.get("knowledge")]
    out["kf1"] = mean([unigram_f1(p["prediction"], p["knowledge"]) for p in grounded]) if grounded else None
    out["kf1_pairs"] = len(grounded)
    out["distinct_1"] = distinct(preds, 1)
    out["distinct_2"] = distinct(preds, 2)
    return out, raw


def versions():
    v = {"python": platform.python_version()}
    for name in ("sacrebleu", "rouge-score", "nltk", "absl-py", "numpy", "regex", "six", "portalocker"):
        v[name] = metadata.version(name)
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"), help="the shared data folder")
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "metrics"))
    ap.add_argument("--force", action="store_true", help="write over existing files (the committed references are frozen)")
    args = ap.parse_args()
    out = Path(args.out)
    there = [str(out / n) for n in ("pairs.jsonl", "reference.json", "porter.tsv") if (out / n).exists()]
    if there and not args.force:
        sys.exit(f"metrics.py: {', '.join(there)} exist: frozen references (tests/integration/metrics.rs); --force rewrites them, --out writes elsewhere")
    out.mkdir(parents=True, exist_ok=True)

    pairs = opendialkg_pairs(Path(args.data) / "opendialkg" / "dialogs_dev.csv", MAX_PAIRS)
    if len(pairs) < 1000:
        sys.exit(f"only {len(pairs)} pairs")
    with open(out / "pairs.jsonl", "w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")

    edge = [{"prediction": p, "reference": r, "knowledge": k} for p, r, k in EDGE]
    odk, odk_raw = scores(pairs)
    edge_scores, edge_raw = scores(edge)
    reference = {
        "versions": versions(),
        "scale": "every score is a fraction in 0..1; sacrebleu_raw is sacrebleu's own 0..100 BLEU",
        "opendialkg": {"source": "opendialkg/dialogs_dev.csv", "pairs_file": "pairs.jsonl", "scores": odk, "sacrebleu_raw": odk_raw},
        "edge": {"pairs": edge, "scores": edge_scores, "sacrebleu_raw": edge_raw, "per_pair": [scores([p])[0] for p in edge]},
    }
    with open(out / "reference.json", "w", encoding="utf-8") as f:
        json.dump(reference, f, ensure_ascii=False, indent=1)
        f.write("\n")

    # Porter: every token the rouge tokenizer stems in these pairs, and the hand-picked words.
    stemmer = PorterStemmer()
    words = set(PORTER_WORDS.split())
    for p in pairs + edge:
        for text in (p["prediction"], p["reference"]):
            words.update(t for t in rouge_tokenize.tokenize(text, None))
    with open(out / "porter.tsv", "w", encoding="utf-8") as f:
        f.write("# word\tNLTK PorterStemmer().stem(word) (NLTK_EXTENSIONS), nltk " + metadata.version("nltk") + "\n")
        for w in sorted(words):
            f.write(f"{w}\t{stemmer.stem(w)}\n")
    print(f"{len(pairs)} pairs, {len(edge)} edge pairs, {len(words)} stemmer words -> {out}", file=sys.stderr)
    print(json.dumps(odk, indent=1))


if __name__ == "__main__":
    main()
