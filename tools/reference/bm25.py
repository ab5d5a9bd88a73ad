#!/usr/bin/env python3
"""Make tests/fixtures/bm25_cases.json: BM25 scores from rank_bm25 (the reference on PyPI),
run offline, for corpora of verbalized facts of the bundled sample and queries from the
shared OpenDialKG dialogs. The Rust test feeds the same token lists to retrieve::bm25 and
compares the scores bit for bit (same operations in the same order).

    PY=$(bash tools/venv.sh pcst)       # rank_bm25 0.2.2 (any Python with it will do)
    $PY tools/reference/bm25.py tests/fixtures/opendialkg-sample.tsv \
        ../shared/data/opendialkg/dialogs_dev.csv tests/fixtures/bm25_cases.json --force

The committed cases are frozen: without `--force` it refuses to write over an existing file.
"""
import csv
import json
import os
import re
import sys

from rank_bm25 import BM25Okapi


def tokenize(text):
    # Same as retrieve::bm25::tokenize for this data: lowercase runs of letters and digits.
    return [t for t in re.split(r"[^0-9a-zA-Z\u00c0-\u024f]+", text.lower()) if t]


def main(sample, dialogs, out):
    facts = []
    with open(sample, encoding="utf-8") as f:
        for line in f:
            s, r, o = line.rstrip("\n").split("\t")
            r = r.lstrip("~").lower().replace("_", " ").replace("-", " ")
            facts.append(f"{s} {r} {o}")
    queries = []
    with open(dialogs, newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f)):
            if i >= 40:
                break
            for m in json.loads(row["Messages"]):
                if m.get("type") == "chat":
                    queries.append(m["message"])
    cases = []
    for c in range(30):
        corpus = [tokenize(d) for d in facts[c * 37 : c * 37 + 5 + c * 3]]
        query = tokenize(" ".join(queries[c * 2 : c * 2 + 1 + c % 3]))
        bm = BM25Okapi(corpus)
        cases.append({"corpus": corpus, "query": query, "scores": [float(x) for x in bm.get_scores(query)]})
    with open(out, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)
    print(f"{out}: {len(cases)} cases")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--force"]
    if len(args) != 3:
        sys.exit("usage: bm25.py SAMPLE.tsv DIALOGS.csv OUT.json [--force]")
    if os.path.exists(args[2]) and "--force" not in sys.argv:
        sys.exit(f"bm25.py: {args[2]} exists: frozen test cases (src/retrieve/bm25.rs); --force rewrites it")
    main(*args)
