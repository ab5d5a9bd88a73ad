#!/usr/bin/env python3
"""How the reranked order's path@1 moves with `--rerank-fusion`'s weight, from one run.

A reranked path's explanation holds the cross-encoder's score and where each pooled retriever
ranked it ("reranked 0.0267 + 1 x 1.5000 (1/rank); from gsr #1 (-0.8191), pcst #2 (6.2408)"),
so one `trellis eval retrieval --rerank ... --turns FILE` run gives the order at any weight w:
score = cross-encoder + w * sum(1/rank). This script recomputes path@1 for a grid of weights,
on all turns and on two halves (alternate blocks of 100 turns: a weight that only suits one
half shows), plus the ranks alone (reciprocal rank fusion without the cross-encoder) and each
pooled retriever alone. It first checks itself: at the run's own weight it must give the
run's report.

    python3 tools/eval/fusion.py BENCH_DIR/encoders-gsr-pcst-reranked-top-20-each-.turns.jsonl

Only the pooled paths are seen: a retriever "alone" here is its top 20, the same as its own
path@1.
"""
import json
import re
import sys

SCORE = re.compile(r"^reranked (-?[0-9.]+)(?: \+ ([0-9.e+-]+) x -?[0-9.]+ \(1/rank\))?; from (.*)$")
FOUND = re.compile(r"(\w+) #(\d+) \((-?[0-9.]+|NaN|-?inf)\)")


def read(path):
    turns, weights = [], set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            t = json.loads(line)
            paths = []
            for p in t["paths"]:
                m = SCORE.match(p["explanation"])
                if not m:
                    sys.exit(f"{path}:{n}: not a reranked path's explanation: {p['explanation']!r}")
                weights.add(float(m.group(2) or 0))
                ranks = {name: int(rank) for name, rank, _ in FOUND.findall(m.group(3))}
                paths.append((float(m.group(1)), ranks, p["right"]))
            turns.append(paths)
    if len(weights) > 1:
        sys.exit(f"{path}: paths reranked with different weights {sorted(weights)}")
    return turns, (weights.pop() if weights else 0.0)


def path_at_1(turns, key, idx):
    hits = 0
    for i in idx:
        paths = turns[i]
        if paths:
            # max() keeps the first of equal keys: pool order, as the engine's stable sort.
            best = max(range(len(paths)), key=lambda j: (key(paths[j]), -j))
            hits += paths[best][2]
    return hits / max(len(idx), 1)


def fused(w):
    return lambda p: p[0] + w * sum(1 / r for r in p[1].values())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    turns, run_weight = read(sys.argv[1])
    n = len(turns)
    all_ = list(range(n))
    halves = ([i for i in all_ if (i // 100) % 2 == 0], [i for i in all_ if (i // 100) % 2 == 1])
    # The run's own order: the file lists each turn's paths best first.
    own = sum(bool(p) and p[0][2] for p in turns) / max(n, 1)
    again = path_at_1(turns, fused(run_weight), all_)
    # Scores are printed to 4 decimals: a near tie may break the other way.
    if abs(own - again) > 2 / max(n, 1):
        sys.exit(f"recomputed path@1 {again:.4f} at the run's weight {run_weight} is not the run's {own:.4f}")
    print(f"{n} turns; the run's weight {run_weight}: path@1 {own:.4f} (recomputed {again:.4f})\n")
    print("| order | path@1 | first half | second half |")
    print("|---|---|---|---|")
    rows = [(f"cross-encoder + {w} x sum(1/rank)", fused(w)) for w in (0, 0.25, 0.5, 0.7, 1, 1.5, 2, 3, 5)]
    rows.append(("sum(1/rank) alone (ties: cross-encoder)", lambda p: (sum(1 / r for r in p[1].values()), p[0])))
    names = sorted({name for paths in turns for p in paths for name in p[1]})
    rows += [(f"{name} alone", lambda p, name=name: -p[1].get(name, 10**9)) for name in names]
    for label, key in rows:
        print(f"| {label} | {path_at_1(turns, key, all_):.4f} | {path_at_1(turns, key, halves[0]):.4f} | {path_at_1(turns, key, halves[1]):.4f} |")


if __name__ == "__main__":
    main()
