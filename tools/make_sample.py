#!/usr/bin/env python3
"""Cut the bundled OpenDialKG sample (tests/fixtures/opendialkg-sample.tsv) from the shared data.

Seeds: the entities on the gold KG paths of the first dialogs of dialogs_dev.csv, plus
Jordan Spieth (used by the README and tests). Keeps every kg.tsv line that touches a seed,
at most PER_SEED lines per seed, in file order, so the sample has real neighbourhoods.

    python3 tools/make_sample.py ../shared/data/opendialkg > tests/fixtures/opendialkg-sample.tsv
"""
import csv
import json
import sys
from collections import Counter

PER_SEED = 60
DIALOGS = 25


def main(data_dir):
    seeds = ["Jordan Spieth"]
    with open(f"{data_dir}/dialogs_dev.csv", newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f)):
            if i >= DIALOGS:
                break
            for action in json.loads(row["Messages"]):
                path = action.get("metadata", {}).get("path")
                if action.get("type") == "action" and path:
                    for s, _, o in path[1]:
                        seeds += [s, o]
    seeds = list(dict.fromkeys(seeds))
    seed_set = set(seeds)
    used = Counter()
    out = sys.stdout
    with open(f"{data_dir}/kg.tsv", encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 3:
                continue
            touched = [c for c in (cols[0], cols[2]) if c in seed_set and used[c] < PER_SEED]
            if touched:
                for c in touched:
                    used[c] += 1
                out.write(line)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/opendialkg")
