#!/usr/bin/env python3
"""`trellis retrieve` requests for a synthetic power-law store (tools/data/gen_powerlaw.rs).

Each request is one user message naming two entities, drawn as the generator draws the
subjects and objects of its facts: log-uniform over the entity ids (so hubs are drawn
often), through the same id permutation, named `entity N` as the generator names them.
The history is linked like any dialog (no "entities" field), so an entity that appears in
no fact simply links to nothing. Deterministic for a given seed; the generator's own
SplitMix64 stream is reproduced bit for bit (a different seed than the graph's, so the
requests are not its first facts).

Usage: python3 tools/data/powerlaw_requests.py --entities 5000000 --requests 1000 > req50.jsonl
"""

import argparse
import json
import math

MASK = (1 << 64) - 1


class SplitMix:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def unit(self):
        return (self.next() >> 11) / float(1 << 53)

    def power_law(self, n):
        # As in gen_powerlaw.rs: (n + 1)^u, truncated, minus one, capped at n - 1.
        x = int((n + 1.0) ** self.unit())
        return min(max(x - 1, 0), n - 1)


def multiplier(entities):
    mult = 2_654_435_761 % entities
    while math.gcd(mult, entities) != 1:
        mult += 1
    return mult


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entities", type=int, default=5_000_000, help="the generator's --entities")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    n = max(args.entities, 2)
    mult = multiplier(n)
    rng = SplitMix(args.seed)
    for i in range(args.requests):
        a = rng.power_law(n) * mult % n
        b = rng.power_law(n) * mult % n
        print(json.dumps({"id": i, "history": [f"What do entity {a} and entity {b} have in common?"]}))


if __name__ == "__main__":
    main()
