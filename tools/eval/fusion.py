#!/usr/bin/env python3
"""How the reranked order's path@1 moves with `--rerank-fusion`'s weight, from one run.

A reranked path's explanation names the weight and where each pooled retriever ranked it
("reranked 0.0267 + 1 x 1.5000 (1/rank); from gsr #1 (-0.8191), pcst #2 (6.2408)"), and its
score is the cross-encoder's logit plus weight x sum(1/rank); so one
`trellis eval retrieval --rerank ... --turns FILE` run gives the order at any weight w. This
script recomputes path@1 for a grid of weights, on all turns and on two halves (alternate
blocks of 100 turns: a weight that only suits one half shows), plus the ranks alone
(reciprocal rank fusion without the cross-encoder) and each pooled retriever alone (its top
`--rerank-top` as pooled: the same as its own path@1). It first checks itself: at the run's
own weight it must give the run's order.

    python3 tools/eval/fusion.py BENCH_DIR/encoders-gsr-pcst-reranked-top-20-each-.turns.jsonl

Ties break as the engine breaks them: by pool order (the first list's paths by rank, then
the new paths of the next list, ...).
"""
import json
import math
import re
import sys

NUMBER = r"-?(?:[0-9.]+(?:e[+-]?[0-9]+)?|NaN|inf)"
SCORE = re.compile(rf"^reranked {NUMBER}(?: \+ ({NUMBER}) x {NUMBER} \(1/rank\))?; from (.*)$")
FOUND = re.compile(rf"(\w+) #(\d+) \(({NUMBER})\)")


def read(path):
    """Per turn, its paths as (logit, {retriever: rank}, right), in the file's order; and the
    run's weight."""
    turns, weights = [], set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            t = json.loads(line)
            paths = []
            for p in t["paths"]:
                m = SCORE.match(p["explanation"])
                if not m:
                    sys.exit(f"{path}:{n}: not a reranked path's explanation: {p['explanation']!r}")
                w = float(m.group(1) or 0)
                weights.add(w)
                found = [(name, int(rank)) for name, rank, _ in FOUND.findall(m.group(2))]
                ranks = dict(found)
                if len(ranks) != len(found):
                    sys.exit(f"{path}:{n}: a retriever named twice: {p['explanation']!r}")
                score = p["score"] if p["score"] is not None else math.nan
                # The exact logit: the score less the fused term (the explanation's is rounded).
                paths.append((score - w * sum(1 / r for r in ranks.values()), ranks, p["right"]))
            turns.append(pool_order(paths))
    if len(weights) > 1:
        sys.exit(f"{path}: paths reranked with different weights {sorted(weights)}")
    return turns, (weights.pop() if weights else 0.0)


def pool_order(paths):
    """The paths in the engine's pool order: a path's place is its first appearance, the
    lists in the order the explanations name them, each list by rank."""
    lists = []
    for _, ranks, _ in paths:
        for name in ranks:  # each explanation names its retrievers in list order
            if name not in lists:
                lists.append(name)
    # An explanation that names b before a fixes a's place after b: order the lists by the
    # explanations' pairs (a list named first in no pair keeps its first-seen place).
    for _ in range(len(lists)):
        for _, ranks, _ in paths:
            names = list(ranks)
            for a, b in zip(names, names[1:]):
                if lists.index(a) > lists.index(b):
                    lists.remove(a)
                    lists.insert(lists.index(b), a)
    return sorted(paths, key=lambda p: min((lists.index(name), rank) for name, rank in p[1].items()))


def order_key(score):
    # The engine sorts by f64::total_cmp, descending: NaN (positive) above everything.
    return math.inf if math.isnan(score) else score


def path_at_1(turns, key, idx, keep=lambda p: True):
    hits = 0
    for i in idx:
        paths = [p for p in turns[i] if keep(p)]
        if paths:
            # max() keeps the first of equal keys: pool order, as the engine's stable sort.
            best = max(range(len(paths)), key=lambda j: (key(paths[j]), -j))
            hits += paths[best][2]
    return hits / max(len(idx), 1)


def fused(w):
    return lambda p: order_key(p[0] + w * sum(1 / r for r in p[1].values()))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    turns, run_weight = read(sys.argv[1])
    n = len(turns)
    all_ = list(range(n))
    halves = ([i for i in all_ if (i // 100) % 2 == 0], [i for i in all_ if (i // 100) % 2 == 1])
    # The run's own top path against this script's at the run's weight, turn by turn.
    with open(sys.argv[1], encoding="utf-8") as f:
        own = [next((p["right"] for p in json.loads(line)["paths"]), False) for line in f]
    again = path_at_1(turns, fused(run_weight), all_)
    if abs(sum(own) / max(n, 1) - again) > 1e-12:
        sys.exit(f"recomputed path@1 {again:.4f} at the run's weight {run_weight} is not the run's {sum(own) / max(n, 1):.4f}")
    print(f"{n} turns; the run's weight {run_weight}: path@1 {again:.4f}\n")
    print("| order | path@1 | first half | second half |")
    print("|---|---|---|---|")
    rows = [(f"cross-encoder + {w} x sum(1/rank)", fused(w), lambda p: True) for w in (0, 0.25, 0.5, 0.7, 1, 1.5, 2, 3, 5)]
    rows.append(("sum(1/rank) alone (ties: cross-encoder)", lambda p: (sum(1 / r for r in p[1].values()), order_key(p[0])), lambda p: True))
    names = sorted({name for paths in turns for p in paths for name in p[1]})
    # A retriever alone: only its own paths (none found: a miss), by its rank.
    rows += [(f"{name} alone", lambda p, name=name: -p[1][name], lambda p, name=name: name in p[1]) for name in names]
    for label, key, keep in rows:
        cells = [path_at_1(turns, key, idx, keep) for idx in (all_, *halves)]
        print(f"| {label} | " + " | ".join(f"{c:.4f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
