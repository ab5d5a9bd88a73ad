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
spaces, or "" when the dialog has had none yet; its entities are that path's first head and
every tail, each once (compared folded, below), [] when there is no path.

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
- bleu_dialoggsr."n": the DialogGSR authors' BLEU (utils/metrics.py `bleu_corpus` of their
  code): nltk `corpus_bleu` with weights (1/n, ..., 1/n) and
  `SmoothingFunction(epsilon=1e-12).method1`, on `text.split()` tokens (case kept).
- distinct_replies / distinct_replies_share: distinct prediction strings, and / pairs.
- grounding: over the pairs with at least one non-empty entity name, the share whose prediction
  (mention_rate) and whose reference (reference_mention_rate) names one of them; entity_recall =
  sum over pairs of |entities named by both| / sum of |named by the reference| (null when that
  sum, reference_mentions, is 0). "Names" is the delexicalizer's rule (src/generate/delex.rs,
  rules 3 and 4), written here from its text, not from the Rust code: names matched longest
  first, then in list order, never overlapping, each character compared after folding (the
  first character of its lowercase), an occurrence with no letter or digit (str.isalnum) right
  before or after it; a name whose folded form is one word of the linker's stop words (read
  from src/link/stopwords.rs) matched with its exact case; a name with fewer than two letters
  or digits never.

Also a "grounding" corpus of hand-written pairs with entity names (stop-word titles,
possessives, names inside longer words, overlapping names, no knowledge), scored as one corpus
and pair by pair, and an "edge" corpus of hand-written pairs (empty text, whitespace, unicode, tokenizer corners)
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
from nltk.translate.bleu_score import SmoothingFunction, corpus_bleu
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
            entities = []
            for k, m in enumerate(json.loads(row["Messages"])):
                if m.get("type") == "action":
                    p = (m.get("metadata") or {}).get("path")
                    if p and len(p) > 1 and p[1]:
                        knowledge = " ".join(" ".join(t) for t in p[1])
                        entities = path_entities(p[1])
                elif m.get("type") == "chat":
                    if m.get("sender") == "assistant" and last_chat is not None:
                        pairs.append({"id": f"dev-{row_i}-{k}", "prediction": m["message"], "reference": last_chat, "knowledge": knowledge, "entities": entities})
                        if len(pairs) == limit:
                            return pairs
                    last_chat = m["message"]
    return pairs


def fold(text):
    """Each character replaced by the first character of its lowercase form."""
    return "".join((c.lower() or c)[0] for c in text)


def path_entities(triples):
    """A path's first head, then each tail, each once (compared folded), empty names left out."""
    names, seen = [], set()
    for name in [triples[0][0]] + [t[2] for t in triples]:
        if name and fold(name) not in seen:
            seen.add(fold(name))
            names.append(name)
    return names


def stop_words():
    text = (ROOT / "src" / "link" / "stopwords.rs").read_text(encoding="utf-8")
    body = text[text.index("STOP_WORDS") : text.index("];")]
    return set(re.findall(r'"([^"]*)"', body))


STOP_WORDS = stop_words()


def named(text, names):
    """For each name, whether the text names it (the delexicalizer's rule, module docstring)."""
    folded_text = fold(text)
    claimed = [False] * len(text)
    found = [False] * len(names)
    wanted = []
    for k, name in enumerate(names):
        if sum(c.isalnum() for c in name) < 2:
            continue
        core = name.strip()
        single_stop_word = not any(c.isspace() for c in fold(core)) and fold(core) in STOP_WORDS
        wanted.append((-len(core), k, core if single_stop_word else fold(core), single_stop_word))
    for _, k, pattern, exact in sorted(wanted):
        haystack = text if exact else folded_text
        i = 0
        while i + len(pattern) <= len(text):
            end = i + len(pattern)
            if (
                haystack[i:end] == pattern
                and (i == 0 or not folded_text[i - 1].isalnum())
                and (end == len(text) or not folded_text[end].isalnum())
                and not any(claimed[i:end])
            ):
                for j in range(i, end):
                    claimed[j] = True
                found[k] = True
                i = end
            else:
                i += 1
    return found


def grounding(pairs):
    with_entities = names_pred = names_ref = both = by_ref = 0
    for p in pairs:
        names = [n for n in (p.get("entities") or []) if n]
        if not names:
            continue
        with_entities += 1
        pred = named(p["prediction"], names)
        ref = named(p["reference"], names)
        names_pred += any(pred)
        names_ref += any(ref)
        by_ref += sum(ref)
        both += sum(a and b for a, b in zip(pred, ref))
    return {
        "pairs": with_entities,
        "mention_rate": names_pred / with_entities if with_entities else None,
        "reference_mention_rate": names_ref / with_entities if with_entities else None,
        "entity_recall": both / by_ref if by_ref else None,
        "reference_mentions": by_ref,
    }


# Hand-written pairs with entity names: (prediction, reference, entities or None).
GROUNDING = [
    # "It" (a stop word) only with its capital; "it" is the pronoun.
    ("I loved It, it was scary.", "Have you read it? It is by Stephen King.", ["Stephen King", "It", "Bill Skarsgård"]),
    ("it is scary", "IT is scary", ["It"]),
    # Possessives, any case.
    ("Stephen King's novels are great", "I like STEPHEN KING's books and The Shining", ["Stephen King", "The Shining"]),
    # A name inside a longer word does not count.
    ("The Kingdom is vast and kingly", "King wrote it", ["King", "Kingdom Hearts"]),
    ("Kingdom Hearts, not King.", "kingdom hearts", ["King", "Kingdom Hearts"]),
    # No knowledge: left out, whatever the texts name.
    ("Stephen King wrote It", "Stephen King", None),
    ("hello", "hello", []),
    ("hello", "hello", [""]),
    # Longer names first, matches never overlap.
    ("Stephen King met King Kong", "King Kong and Stephen", ["King", "Stephen King", "Stephen", "King Kong"]),
    # Names with fewer than two letters or digits never match.
    ("X and 7 and Q1", "X 7 Q1", ["X", "7", "Q1", ""]),
    # Non-ASCII, case folded; "Skarsgårds" is a longer word.
    ("BILL SKARSGÅRD was great; Skarsgårds too", "bill skarsgård", ["Bill Skarsgård", "Skarsgård"]),
    # The reference names none: counts for the mention rate, not for recall.
    ("Stephen King", "I don't know", ["Stephen King"]),
    # Several stop words are not one stop word: any case. "Up" the film only as "Up".
    ("the who rocks, look up", "The Who is a band. Up is a film", ["The Who", "Up"]),
    # Punctuation and digits around names.
    ("(Harry Potter)-fans, harry potter2", "\"Harry Potter\" 7", ["Harry Potter", "7"]),
    # Repeated replies (distinct replies counts exact strings).
    ("I like it.", "I like Jordan Spieth.", ["Jordan Spieth", "Golf"]),
    ("I like it.", "Golf!", ["Jordan Spieth", "Golf"]),
    ("i like it.", "golf", ["Jordan Spieth", "Golf"]),
]

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
    smooth = SmoothingFunction(epsilon=1e-12).method1
    out["bleu_dialoggsr"] = {}
    for n in range(1, 5):
        out["bleu_dialoggsr"][str(n)] = float(corpus_bleu([[r.split()] for r in refs], [p.split() for p in preds], weights=(1.0 / n,) * n, smoothing_function=smooth))
    out["distinct_replies"] = len(set(preds))
    out["distinct_replies_share"] = len(set(preds)) / len(preds)
    out["grounding"] = grounding(pairs)
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
    grounded = [{"prediction": p, "reference": r, "knowledge": None if e is None else " ".join(e), "entities": e} for p, r, e in GROUNDING]
    odk, odk_raw = scores(pairs)
    edge_scores, edge_raw = scores(edge)
    reference = {
        "versions": versions(),
        "scale": "every score is a fraction in 0..1; sacrebleu_raw is sacrebleu's own 0..100 BLEU",
        "opendialkg": {"source": "opendialkg/dialogs_dev.csv", "pairs_file": "pairs.jsonl", "scores": odk, "sacrebleu_raw": odk_raw},
        "edge": {"pairs": edge, "scores": edge_scores, "sacrebleu_raw": edge_raw, "per_pair": [scores([p])[0] for p in edge]},
        "grounding": {"pairs": grounded, "scores": scores(grounded)[0], "per_pair": [scores([p])[0] for p in grounded]},
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
