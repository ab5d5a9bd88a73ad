#!/usr/bin/env python3
"""Print a table of docs/benchmarks-2026-11-25.md from criterion's results (medians, i.e. p50).

    cargo bench --bench store && python3 tools/bench/criterion_medians.py
"""
import json
import os
import sys

root = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/trellis/target")), "criterion")
if not os.path.isdir(root):
    sys.exit(f"criterion_medians.py: no criterion results in {root}: run `cargo bench --bench store` first (same CARGO_TARGET_DIR)")
print("| benchmark | median (p50) | mean |")
print("|---|---|---|")
for group in sorted(os.listdir(root)):
    gdir = os.path.join(root, group)
    if not os.path.isdir(gdir) or group == "report":
        continue
    for bench in sorted(os.listdir(gdir)):
        path = os.path.join(gdir, bench, "new", "estimates.json")
        if not os.path.exists(path):
            continue
        est = json.load(open(path))
        med, mean = est["median"]["point_estimate"], est["mean"]["point_estimate"]
        unit, div = ("ms", 1e6) if med > 1e6 else ("µs", 1e3)
        print(f"| {group}/{bench} | {med / div:.2f} {unit} | {mean / div:.2f} {unit} |")
sys.exit(0)
