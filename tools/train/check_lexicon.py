#!/usr/bin/env python3
"""Learn the fact checker's relation lexicon (issue 35) from dialogs_train.csv and the graph,
and write the checker file Trellis reads (checker.json) beside its card.

What a reply says between two entities names the relation that connects them: "Clint
Eastwood directed Mystic River", "Happy Gilmore stars Adam Sandler". For every assistant
reply of the training dialogs that follows a chosen path, and every fact (s, r, o) of that
path whose two names both occur in one sentence of the reply, the words strictly between
the two names (at most 10) are counted for r (its forward name: `~r` counts as r). A word
(or a two-word phrase with at least one word that is not a function word) is a cue of r when it
occurs there at least MIN_COUNT times and at least MIN_SHARE of its occurrences between
facts' names are r's, and at least LIFT times r's share of all those fact mentions (a
frequent relation's words must be more than frequent). Single function words (the checker's list, read from
src/check/function_words.rs so there is one list) are never cues. The checker also takes the
words of each relation's own name as cues (in Rust), so the lexicon holds what the names
lack.

From the graph it records, per relation, how functional it is: of the subjects with a fact
of r, the share with exactly one object (and of the objects, the share with exactly one
subject). The checker refutes only on relations functional in the graph.

    python3 tools/train/check_lexicon.py --dialogs ../shared/data/opendialkg/dialogs_train.csv \
        --kg ../shared/data/opendialkg/kg.tsv --out models/check-opendialkg

Deterministic; stdlib only; seconds.
"""
import argparse
import collections
import csv
import json
import os
import re
import sys

MIN_COUNT = 5
MIN_SHARE = 0.3
LIFT = 2.0
MAX_BETWEEN = 10
WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
SENTENCE_END = re.compile(r"[.!?;]+(?:\s|$)")


def stop_words(repo):
    path = os.path.join(repo, "src", "check", "function_words.rs")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    body = text[text.index("FUNCTION_WORDS: &[&str]"):]
    body = body[:body.index("];")]
    return set(re.findall(r'"([^"]*)"', body))


def forward(relation):
    return relation[1:] if relation.startswith("~") else relation


def occurrences(sentence, name):
    """Start and end of each whole-word, case-insensitive occurrence of name."""
    pattern = r"(?<![a-z0-9])" + re.escape(name.lower()) + r"(?![a-z0-9])"
    return [(m.start(), m.end()) for m in re.finditer(pattern, sentence)]


def between_words(sentence, a, b):
    """Words between the closest occurrences of a and b, either order; None when absent."""
    best = None
    for (sa, ea) in occurrences(sentence, a):
        for (sb, eb) in occurrences(sentence, b):
            if ea <= sb:
                gap = sentence[ea:sb]
            elif eb <= sa:
                gap = sentence[eb:sa]
            else:
                continue
            words = WORD.findall(gap)
            if best is None or len(words) < len(best):
                best = words
    if best is None or len(best) > MAX_BETWEEN:
        return None
    return best


def replies_with_paths(path):
    csv.field_size_limit(1 << 26)
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            messages = json.loads(row["Messages"])
            for i, m in enumerate(messages):
                if m.get("type") != "action" or "path" not in m.get("metadata", {}):
                    continue
                triples = m["metadata"]["path"][1]
                nxt = messages[i + 1] if i + 1 < len(messages) else None
                if nxt is None or nxt.get("type") != "chat" or "message" not in nxt:
                    continue
                yield nxt["message"], triples


def learn(dialogs, stops):
    per_relation = collections.Counter()
    per_word = collections.Counter()
    relation_pairs = collections.Counter()
    pairs = 0
    for reply, triples in replies_with_paths(dialogs):
        sentences = [s for s in SENTENCE_END.split(reply.lower()) if s.strip()]
        for s, r, o in triples:
            for sentence in sentences:
                words = between_words(sentence, s, o)
                if words is None:
                    continue
                pairs += 1
                relation_pairs[forward(r)] += 1
                grams = set(w for w in words if w not in stops and len(w) > 1)
                grams |= set(" ".join(words[k:k + 2]) for k in range(len(words) - 1)
                             if not (words[k] in stops and words[k + 1] in stops))
                for g in grams:
                    per_relation[(forward(r), g)] += 1
                    per_word[g] += 1
                break
    prior = {r: c / max(pairs, 1) for r, c in relation_pairs.items()}
    cues = collections.defaultdict(list)
    for (r, g), c in sorted(per_relation.items()):
        share = c / per_word[g]
        if c >= MIN_COUNT and share >= max(MIN_SHARE, LIFT * prior[r]):
            cues[r].append(g)
    return {r: sorted(v) for r, v in sorted(cues.items())}, pairs


def functionality(kg):
    objects = collections.defaultdict(set)
    subjects = collections.defaultdict(set)
    with open(kg, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                continue
            s, r, o = parts
            if r.startswith("~"):
                s, r, o = o, r[1:], s
            objects[(r, s)].add(o)
            subjects[(r, o)].add(s)
    out = collections.defaultdict(lambda: {"subjects": 0, "single_object": 0, "objects": 0, "single_subject": 0})
    for (r, _), objs in objects.items():
        out[r]["subjects"] += 1
        out[r]["single_object"] += len(objs) == 1
    for (r, _), subs in subjects.items():
        out[r]["objects"] += 1
        out[r]["single_subject"] += len(subs) == 1
    return {r: v for r, v in sorted(out.items())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dialogs", required=True)
    ap.add_argument("--kg", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    stops = stop_words(repo)
    cues, pairs = learn(args.dialogs, stops)
    relations = functionality(args.kg)
    os.makedirs(args.out, exist_ok=True)
    out = {
        "format": 1,
        "task": "fact-check",
        "cues": cues,
        "relations": relations,
        "trained_on": {
            "dialogs": os.path.basename(args.dialogs),
            "graph": os.path.basename(args.kg),
            "fact_mentions": pairs,
            "min_count": MIN_COUNT,
            "min_share": MIN_SHARE,
            "lift": LIFT,
        },
    }
    with open(os.path.join(args.out, "checker.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    n = sum(len(v) for v in cues.values())
    print(f"{pairs} fact mentions; {n} cues for {len(cues)} relations; {len(relations)} relations' functionality",
          file=sys.stderr)


if __name__ == "__main__":
    main()
