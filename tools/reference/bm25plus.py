#!/usr/bin/env python3
"""Make tests/fixtures/bm25plus_cases.json: BM25+ scores from rank_bm25's BM25Plus (the
query producer's label function in the seed's code; defaults k1 1.5, b 0.75, delta 1), run
offline. Corpora are entity documents built from the bundled sample graph (name, then
"relation object" lines, as Trellis's text index writes them, capped at 32 facts), queries
are replies of the shared OpenDialKG dev dialogs, including repeated words, words no
document holds and an empty document. The Rust test (src/text/bm25.rs) feeds the same token
lists to text::bm25::Bm25Plus and compares the scores.

    PY=$(bash tools/venv.sh pcst)       # rank_bm25 0.2.2
    $PY tools/reference/bm25plus.py tests/fixtures/opendialkg-sample.tsv \
        ../shared/data/opendialkg/dialogs_dev.csv tests/fixtures/bm25plus_cases.json --force

The committed cases are frozen: without `--force` it refuses to write over an existing file.
"""
import csv
import json
import os
import re
import sys

from rank_bm25 import BM25Plus


def tokenize(text):
    # Lower-cased runs of letters and digits: close to text::analyzer::words on this data
    # (the test feeds token lists, so the scorer is what is compared, not the tokenizer).
    return [t for t in re.split(r"[^0-9a-z\u00c0-\u024f]+", text.lower()) if t]


def main(sample, dialogs, out):
    docs = {}
    with open(sample, encoding="utf-8") as f:
        for line in f:
            s, r, o = line.rstrip("\n").split("\t")
            lines = docs.setdefault(s, [s])
            if len(lines) <= 32:
                lines.append(f"{r} {o}")
    documents = [tokenize("\n".join(lines)) for lines in docs.values()]
    replies = []
    with open(dialogs, newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f)):
            if i >= 60:
                break
            for m in json.loads(row["Messages"]):
                if m.get("type") == "chat" and m.get("sender") == "assistant":
                    replies.append(m["message"])
    cases = []
    for c in range(40):
        corpus = documents[c * 11 : c * 11 + 2 + c % 9]
        query = tokenize(replies[c])
        if c % 5 == 0:
            query = query + query[:3] + ["zzzunseen"]
        if c % 7 == 0:
            corpus = corpus + [[]]
        bm = BM25Plus(corpus)
        cases.append({"corpus": corpus, "query": query, "scores": [float(x) for x in bm.get_scores(query)]})
    with open(out, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)
    print(f"{out}: {len(cases)} cases")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--force"]
    if len(args) != 3:
        sys.exit("usage: bm25plus.py SAMPLE.tsv DIALOGS.csv OUT.json [--force]")
    if os.path.exists(args[2]) and "--force" not in sys.argv:
        sys.exit(f"bm25plus.py: {args[2]} exists: frozen test cases (src/text/bm25.rs); --force rewrites it")
    main(*args)
