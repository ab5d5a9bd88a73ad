#!/usr/bin/env python3
"""Train the query producer's learned scorer (issue 34; seed 002's extractive producer, its
pre-training stage) on the BM25++ pseudo-labels of dialogs_train.csv, and write the scorer
Trellis reads (query-producer.json) with its card.

The training data is what `trellis eval queries --features FILE` writes for every scored
turn: each candidate's features (queries::FEATURE_NAMES) and its BM25 / BM25++ labels. The
model is linear over standardized features, trained listwise: a softmax over the turn's
candidates against the pseudo-label's argmax (ties share the target), full batch, Adam,
L2. Deterministic (no sampling); takes seconds.

    B=$CARGO_TARGET_DIR/release/trellis
    $B eval queries --store STORE --input ../shared/data/opendialkg/dialogs_train.csv --features train.jsonl
    $B eval queries --store STORE --input ../shared/data/opendialkg/dialogs_dev.csv --features dev.jsonl
    python3 tools/train/query_producer.py --train train.jsonl --dev dev.jsonl --out models/query-producer-opendialkg

--dev only chooses the L2 strength (by dev R@1 of the label argmax's documents, i.e. fact
R@1 and R@1 as `eval queries` computes them); the shipped figures come from `trellis eval
queries --producer-model` itself. Needs numpy only.
"""
import argparse
import json
import os
import sys

import numpy as np

FEATURES = ["link_probability", "turn_distance", "occurrences", "mean_idf", "words", "in_last_turn", "antecedent",
            "log_degree", "top_score", "name_match", "keyword"]


def load(path, label):
    turns = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if not r["features"]:
                continue
            x = np.asarray(r["features"], dtype=np.float64)
            y = np.asarray(r[label], dtype=np.float64)
            turns.append((x, y, np.asarray(r["hits"], dtype=bool), np.asarray(r["fact_hits"], dtype=bool)))
    return turns


def targets(y):
    if y.max() <= 0:
        return None
    t = (y == y.max()).astype(np.float64)
    return t / t.sum()


def train(turns, mean, scale, l2, steps=400, lr=0.05):
    w = np.zeros(len(FEATURES))
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    data = [((x - mean) / scale, targets(y)) for x, y, _, _ in turns]
    data = [(x, t) for x, t in data if t is not None]
    for step in range(1, steps + 1):
        grad = l2 * w
        loss = 0.5 * l2 * float(w @ w)
        for x, t in data:
            s = x @ w
            s = s - s.max()
            p = np.exp(s)
            p /= p.sum()
            loss -= float(t @ np.log(p + 1e-12)) / len(data)
            grad += x.T @ (p - t) / len(data)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        w -= lr * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
    return w, loss


def recall_at_1(turns, mean, scale, w):
    hit = fact = 0
    for x, _, h, fh in turns:
        s = ((x - mean) / scale) @ w
        # Highest score, ties to the first candidate (as the Rust ranking).
        best = int(np.argmax(s))
        hit += int(h[best])
        fact += int(fh[best])
    return hit / len(turns), fact / len(turns)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--dev", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--label", default="bm25pp", choices=["bm25pp", "bm25"])
    args = ap.parse_args()
    tr = load(args.train, args.label)
    dv = load(args.dev, args.label)
    allx = np.concatenate([x for x, _, _, _ in tr])
    mean = allx.mean(axis=0)
    scale = allx.std(axis=0)
    scale[scale == 0] = 1.0
    best = None
    for l2 in [0.0, 1e-3, 1e-2, 1e-1]:
        w, loss = train(tr, mean, scale, l2)
        r1, f1 = recall_at_1(dv, mean, scale, w)
        print(f"l2 {l2:g}: train loss {loss:.4f}, dev R@1 {r1:.4f}, fact R@1 {f1:.4f}", file=sys.stderr)
        if best is None or (r1 + f1) > best[0]:
            best = (r1 + f1, l2, w, r1, f1)
    _, l2, w, r1, f1 = best
    os.makedirs(args.out, exist_ok=True)
    scorer = {
        "format": 1,
        "task": "query-producer",
        "features": FEATURES,
        "mean": [float(v) for v in mean],
        "scale": [float(v) for v in scale],
        "weights": [float(v) for v in w],
        "trained_on": {"turns": len(tr), "label": args.label, "l2": l2, "dev_turns": len(dv),
                       "dev_recall_at_1": round(r1, 4), "dev_fact_recall_at_1": round(f1, 4)},
    }
    with open(os.path.join(args.out, "query-producer.json"), "w", encoding="utf-8") as f:
        json.dump(scorer, f, indent=1)
        f.write("\n")
    print(f"{args.out}: l2 {l2:g}, dev R@1 {r1:.4f}, fact R@1 {f1:.4f}", file=sys.stderr)
    for name, weight in sorted(zip(FEATURES, w), key=lambda p: -abs(p[1])):
        print(f"  {name:18s} {weight:+.3f}", file=sys.stderr)


if __name__ == "__main__":
    main()
