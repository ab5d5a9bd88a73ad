#!/usr/bin/env python3
"""The fact checker's labelled set (issue 35): sample claims, show them to labellers with the
graph's facts read straight from kg.tsv (not through Trellis), and score the checker against
the labels.

    # 1. claims: `trellis check --json` over dev replies (references and generated ones)
    trellis check --store STORE --checker models/check-opendialkg --input refs.jsonl --json > refs.checked
    trellis check --store STORE --checker models/check-opendialkg --input gen.jsonl --json > gen.checked
    # 2. a stratified sample (by the checker's verdict, seeded), items without the verdict
    python3 tools/eval/check_label.py sample --checked refs.checked gen.checked --kg kg.tsv \
        --per-verdict 120,100,100 --items items.jsonl --key key.jsonl
    # 3. labels: one JSON line per item, {"item": N, "label": supported|refuted|not_enough_info|no_claim}
    # 4. precision and recall of each verdict
    python3 tools/eval/check_label.py score --key key.jsonl --labels labels.jsonl
    # 5. a changed checker on the same labelled claims (`trellis check --json` rerun on the
    #    same inputs, in the order of the sample's --checked files)
    python3 tools/eval/check_label.py score --key key.jsonl --labels labels.jsonl \
        --rechecked refs.checked=refs.new gen.checked=gen.new

The labeller sees the dialog's last messages, the reply, the claim (two entities and the
words between them) and the facts: every fact between the two entities, every two-fact chain
between them (at most 12), and each entity's own facts (at most 40 each). Never the
checker's verdict. Stratified sampling makes each verdict's precision estimable; recall is
computed with each stratum weighted by how many claims of that verdict the checked files
hold over how many were sampled. Deterministic for a seed; stdlib only.
"""
import argparse
import collections
import json
import random
import sys

VERDICTS = ["supported", "refuted", "not_enough_info"]
LABELS = VERDICTS + ["no_claim"]


def load_kg(path):
    facts = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                continue
            s, r, o = parts
            if r.startswith("~"):
                s, r, o = o, r[1:], s
            facts.add((s, r, o))
    by_entity = collections.defaultdict(list)
    for s, r, o in sorted(facts):
        by_entity[s].append((s, r, o))
        by_entity[o].append((s, r, o))
    return by_entity


def context(by_entity, a, b):
    fa, fb = by_entity.get(a, []), by_entity.get(b, [])
    direct = [f for f in fa if (f[0] == a and f[2] == b) or (f[0] == b and f[2] == a)]
    other = lambda f, x: f[2] if f[0] == x else f[0]
    mids_b = collections.defaultdict(list)
    for f in fb:
        mids_b[other(f, b)].append(f)
    chains = []
    for f in fa:
        z = other(f, a)
        if z in (a, b):
            continue
        for g in mids_b.get(z, []):
            chains.append([list(f), list(g)])
    return {
        "facts_between": [list(f) for f in direct],
        "chains_between": chains[:12],
        "subject_facts": [list(f) for f in fa[:40]],
        "subject_fact_count": len(fa),
        "object_facts": [list(f) for f in fb[:40]],
        "object_fact_count": len(fb),
    }


def sample(args):
    rng = random.Random(args.seed)
    by_entity = load_kg(args.kg)
    pools = collections.defaultdict(list)
    for path in args.checked:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                r = json.loads(line)
                if "claims" not in r:
                    continue
                for k, c in enumerate(r["claims"]):
                    pools[c["verdict"]].append((path, n, k, r, c))
    want = dict(zip(VERDICTS, (int(x) for x in args.per_verdict.split(","))))
    # The n-th checked line answers the n-th (non-blank) line of its requests file.
    requests = {}
    if len(args.requests) != len(args.checked):
        sys.exit("--requests must name one check input per --checked file, in the same order")
    for checked, path in zip(args.checked, args.requests):
        with open(path, encoding="utf-8") as f:
            lines = [l for l in f if l.strip()]
        for n, line in enumerate(lines, 1):
            requests[(checked, n)] = json.loads(line)
    items, keys = [], []
    for v in VERDICTS:
        pool = pools[v]
        chosen = rng.sample(pool, min(want[v], len(pool)))
        for (path, n, k, r, c) in chosen:
            i = len(items)
            q = requests[(path, n)]
            assert q["id"] == r["id"], (path, n)
            reply, history = q.get("reply", q.get("response")), q["history"]
            items.append({
                "item": i,
                "history": [m["text"] if isinstance(m, dict) else m for m in history[-3:]],
                "reply": reply,
                "claim": {"subject": c["subject"]["name"], "words_between": c["phrase"], "object": c["object"]["name"],
                          "subject_from_dialog": c["subject"]["from_dialog"]},
                **context(by_entity, c["subject"]["name"], c["object"]["name"]),
            })
            keys.append({"item": i, "checker": v, "stratum_size": len(pool), "stratum_sampled": len(chosen),
                         "source": path, "line": n, "claim": k,
                         "claim_names": [c["subject"]["name"], c["object"]["name"]]})
    order = list(range(len(items)))
    rng.shuffle(order)
    with open(args.items, "w", encoding="utf-8") as f:
        for new, old in enumerate(order):
            items[old]["item"] = new
            f.write(json.dumps(items[old], ensure_ascii=False) + "\n")
    with open(args.key, "w", encoding="utf-8") as f:
        for new, old in enumerate(order):
            keys[old]["item"] = new
        for k in sorted(keys, key=lambda k: k["item"]):
            f.write(json.dumps(k) + "\n")
    print(f"{len(items)} items: " + ", ".join(f"{v} {min(want[v], len(pools[v]))} of {len(pools[v])}" for v in VERDICTS),
          file=sys.stderr)


def recheck(pairs, keys):
    """The new checker's verdict on each labelled claim (the claim with the same subject and
    object in the same reply), "none" where it makes no such claim any more."""
    by_source = {}
    for old, new in pairs.items():
        with open(new, encoding="utf-8") as f:
            by_source[old] = [json.loads(l) for l in f]
    out = {}
    for i, k in keys.items():
        r = by_source[k["source"]][k["line"] - 1]
        found = [c["verdict"] for c in r.get("claims", [])
                 if [c["subject"]["name"], c["object"]["name"]] == k["claim_names"]]
        out[i] = found[0] if found else "none"
    return out


def score(args):
    keys = {}
    with open(args.key, encoding="utf-8") as f:
        for line in f:
            k = json.loads(line)
            keys[k["item"]] = k
    labels = {}
    with open(args.labels, encoding="utf-8") as f:
        for line in f:
            l = json.loads(line)
            if l["label"] not in LABELS:
                sys.exit(f"{args.labels}: item {l['item']}: unknown label {l['label']!r}")
            labels[l["item"]] = l["label"]
    missing = sorted(set(keys) - set(labels))
    if missing:
        sys.exit(f"{args.labels}: no label for items {missing[:10]}")
    said = {i: k["checker"] for i, k in keys.items()}
    if args.rechecked:
        pairs = dict(p.split("=", 1) for p in args.rechecked)
        missing = sorted({k["source"] for k in keys.values()} - set(pairs))
        if missing:
            sys.exit(f"--rechecked names no new output for {missing}")
        said = recheck(pairs, keys)
    confusion = collections.Counter()
    weighted = collections.Counter()
    for i, k in keys.items():
        confusion[(said[i], labels[i])] += 1
        weighted[(said[i], labels[i])] += k["stratum_size"] / k["stratum_sampled"]
    out = {"items": len(keys), "confusion": {f"{c}->{g}": n for (c, g), n in sorted(confusion.items())}}
    for v in VERDICTS:
        row = sum(confusion[(v, g)] for g in LABELS)
        row_claims = sum(confusion[(v, g)] for g in VERDICTS)
        gold = sum(weighted[(c, v)] for c in VERDICTS + ["none"])
        out[v] = {
            "checker_said": row,
            "precision": confusion[(v, v)] / row if row else None,
            "precision_of_claims": confusion[(v, v)] / row_claims if row_claims else None,
            "recall_weighted": weighted[(v, v)] / gold if gold else None,
        }
    out["no_claim_share"] = sum(n for (c, g), n in confusion.items() if g == "no_claim") / len(keys)
    print(json.dumps(out, indent=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--checked", nargs="+", required=True)
    s.add_argument("--requests", nargs="+", required=True, help="the check inputs, in the order of --checked")
    s.add_argument("--kg", required=True)
    s.add_argument("--per-verdict", default="120,100,100")
    s.add_argument("--seed", type=int, default=35)
    s.add_argument("--items", required=True)
    s.add_argument("--key", required=True)
    c = sub.add_parser("score")
    c.add_argument("--key", required=True)
    c.add_argument("--labels", required=True)
    c.add_argument("--rechecked", nargs="+", help="OLD=NEW: a changed checker's `trellis check --json` output NEW on the inputs OLD was made from")
    args = ap.parse_args()
    sample(args) if args.cmd == "sample" else score(args)


if __name__ == "__main__":
    main()
