"""The dialog rewrite's effect on dev, on all turns and on the turns whose last message has a
pronoun or a reference (`--rewrite`; docs/results-2026-11-27.md "The dialog rewrite").

Reads `trellis eval retrieval --turns` files made without and with `--rewrite`; the pronoun turns are found here, apart from
the engine, by the word lists of src/link/rewrite.rs (a turn is a pronoun turn when the
message right before the action holds one of the words, or a determiner and a reference
noun). Usage:

    python3 tools/eval/rewrite.py DEV_CSV --retrieval NAME PLAIN.jsonl REWRITE.jsonl [...]

The last column: the turns path@1 gained and lost from PLAIN to REWRITE, on the pronoun turns
and on the rest.
"""

import argparse
import csv
import json
import re
import sys

PRONOUNS = {"he", "him", "himself", "his", "she", "her", "herself", "hers", "it", "its", "itself",
            "they", "them", "themselves", "their", "theirs"}
NOUNS = {"movie", "film", "book", "novel", "author", "writer", "actor", "actress", "director", "singer",
         "musician", "band", "show", "series", "song", "album", "player", "team", "game", "city", "country"}
DETERMINERS = {"the", "that", "this", "these", "those"}


def has_reference(text):
    words = [w.strip(".,!?;:\"'()").lower() for w in text.split()]
    if any(w in PRONOUNS for w in words):
        return True
    return any(a in DETERMINERS and (b in NOUNS or b.rstrip("s") in NOUNS) for a, b in zip(words, words[1:]))


def dev_turns(path):
    """(dialog, upto) -> the text of the message before the action, for every action with a path."""
    csv.field_size_limit(sys.maxsize)
    out = {}
    with open(path, newline="") as f:
        for d, row in enumerate(csv.DictReader(f)):
            messages = []
            for a in json.loads(row["Messages"]):
                if a.get("type") == "chat":
                    messages.append(a.get("message") or "")
                elif a.get("type") == "action" and (a.get("metadata") or {}).get("path"):
                    if messages:
                        out[(d, len(messages))] = messages[-1]
    return out


def path_at_1(path):
    rows = [json.loads(l) for l in open(path)]
    return {(r["dialog"], r["upto"]): r.get("right_at") == 1 for r in rows}


def share(hits, keys):
    keys = [k for k in keys if k in hits]
    return (sum(hits[k] for k in keys) / len(keys) if keys else float("nan")), len(keys)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dev")
    p.add_argument("--retrieval", nargs=3, action="append", default=[], metavar=("NAME", "PLAIN", "REWRITE"))
    a = p.parse_args()
    texts = dev_turns(a.dev)
    pron = {k for k, t in texts.items() if has_reference(t)}
    rest = set(texts) - pron
    print(f"turns with a message before the action: {len(texts)}; with a pronoun or reference: {len(pron)}")
    print("| retriever | rewrite | path@1 all | path@1 pronoun turns | path@1 other turns | turns won / lost: pronoun, other |")
    print("|---|---|---|---|---|---|")
    for name, plain, rewritten in a.retrieval:
        before = path_at_1(plain)
        for label, f in (("no", plain), ("yes", rewritten)):
            hits = path_at_1(f)
            (al, n), (pr, m), (ot, o) = share(hits, hits.keys()), share(hits, pron), share(hits, rest)
            moved = ""
            if label == "yes":
                # Turns path@1 gained and lost against the first file, on each kind of turn.
                def won_lost(keys):
                    keys = [k for k in keys if k in hits and k in before]
                    return sum(hits[k] and not before[k] for k in keys), sum(before[k] and not hits[k] for k in keys)
                (pw, pl), (ow, ol) = won_lost(pron), won_lost(rest)
                moved = f"{pw} / {pl}, {ow} / {ol}"
            print(f"| {name} | {label} | {al:.4f} ({n}) | {pr:.4f} ({m}) | {ot:.4f} ({o}) | {moved} |")


if __name__ == "__main__":
    main()
