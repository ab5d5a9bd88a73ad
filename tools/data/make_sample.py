#!/usr/bin/env python3
"""Cut the bundled OpenDialKG sample (tests/fixtures/opendialkg-sample.tsv) from the shared data.

Seeds: the entities on the gold KG paths of the first dialogs of dialogs_dev.csv, plus
Jordan Spieth (used by the README and tests). Keeps every kg.tsv line that touches a seed,
at most PER_SEED lines per seed, in file order, so the sample has real neighbourhoods.

    python3 tools/data/make_sample.py ../shared/data/opendialkg                  # to stdout
    python3 tools/data/make_sample.py ../shared/data/opendialkg --out tests/fixtures/opendialkg-sample.tsv --force

The committed sample is frozen (every fixture and golden of tests/fixtures was made from it):
`--out` refuses to write over an existing file unless `--force`.
"""
import argparse
import csv
import json
import os
import sys
from collections import Counter

PER_SEED = 60
DIALOGS = 25


def main(data_dir, out=sys.stdout):
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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data_dir", nargs="?", default="../shared/data/opendialkg")
    ap.add_argument("--out", help="write here instead of stdout")
    ap.add_argument("--force", action="store_true", help="let --out write over an existing file")
    args = ap.parse_args()
    if args.out and os.path.exists(args.out) and not args.force:
        sys.exit(f"make_sample.py: {args.out} exists: the frozen sample every fixture was made from; --force rewrites it")
    if args.out:
        with open(args.out, "w", encoding="utf-8", newline="") as f:
            main(args.data_dir, f)
    else:
        main(args.data_dir)
