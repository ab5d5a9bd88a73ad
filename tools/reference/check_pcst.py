#!/usr/bin/env python3
"""Checks Trellis's PCST solver against pcst_fast (PyPI), offline, side by side.

On random instances (seeded) and on instance files exported from real candidate graphs
(`trellis-pcst instances ...`), runs pcst_fast and `trellis-pcst solve` on the same
instances and reports, per instance, whether both chose the same nodes and edges, or else
which one reached the better net value (prizes in minus costs in). Times are the median
of --repeat runs of the solver call alone, inputs already in memory on both sides
(numpy arrays for pcst_fast).

    python3 tools/reference/check_pcst.py --random 300 --trellis-pcst target/release/trellis-pcst \
        [--real odkg-seed003.jsonl ...] [--write-fixture tests/fixtures/pcst_cases.json --force]

Exits 1 if Trellis is worse than pcst_fast on any instance.

Needs numpy < 2: the pcst_fast 1.0.10 wheel returns wrong arrays under numpy 2 (seen with
numpy 2.4.6: every entry of the answer equal), so the script checks pcst_fast on a known
instance first. Its environment: `PY=$(bash tools/venv.sh pcst)`. `--write-fixture` refuses to
write over an existing file (the committed cases are frozen) unless `--force`.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pcst_fast

PRUNINGS = ["gw", "strong"]


def random_instance(rng, n, pruning, ties=False):
    """A random graph: a spanning forest plus extra edges; some prizes zero. With `ties`,
    integer prizes and costs in {0, 0.5, 1}."""
    edges = set()
    for v in range(1, n):
        if rng.random() < 0.95:  # a few components stay apart
            edges.add((rng.randrange(v), v))
    for _ in range(rng.randrange(n, 3 * n + 1)):
        u, v = rng.randrange(n), rng.randrange(n)
        if u != v and (u, v) not in edges and (v, u) not in edges:
            edges.add((u, v))
    edges = sorted(edges, key=lambda e: rng.random())
    zero_share = rng.choice([0.0, 0.3, 0.7])
    if ties:
        # Like the retrievers' instances: few distinct values, so many simultaneous events.
        prizes = [0.0 if rng.random() < zero_share else float(rng.randrange(1, 6)) for _ in range(n)]
        costs = [rng.choice([0.0, 0.5, 0.5, 1.0]) for _ in edges]
    else:
        prizes = [0.0 if rng.random() < zero_share else rng.uniform(0.0, 10.0) for _ in range(n)]
        costs = [rng.uniform(0.1, 6.0) for _ in edges]
    return {"prizes": prizes, "edges": [list(e) for e in edges], "costs": costs, "num_clusters": 1, "pruning": pruning}


def solve_reference(inst, repeat):
    edges = np.asarray(inst["edges"], dtype=np.int64).reshape(-1, 2)
    prizes = np.asarray(inst["prizes"], dtype=np.float64)
    costs = np.asarray(inst["costs"], dtype=np.float64)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        nodes, chosen = pcst_fast.pcst_fast(edges, prizes, costs, -1, inst["num_clusters"], inst["pruning"], 0)
        times.append(time.perf_counter() - t)
    return [int(x) for x in nodes], [int(x) for x in chosen], statistics.median(times)


def net_value(inst, nodes, edges):
    return sum(inst["prizes"][v] for v in nodes) - sum(inst["costs"][e] for e in edges)


def run_trellis(binary, instances, repeat):
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
        with open(src, "w") as f:
            for inst in instances:
                f.write(json.dumps(inst) + "\n")
        subprocess.run([binary, "solve", "--input", src, "--output", dst, "--repeat", str(repeat)], check=True)
        with open(dst) as f:
            return [json.loads(line) for line in f]


def compare(name, instances, binary, repeat):
    ours = run_trellis(binary, instances, repeat)
    rows = {"same": 0, "trellis_better": 0, "trellis_worse": 0}
    worse = []
    t_ref, t_ours, faster = [], [], 0
    reference = []
    for i, (inst, mine) in enumerate(zip(instances, ours)):
        nodes, edges, seconds = solve_reference(inst, repeat)
        reference.append((nodes, edges))
        t_ref.append(seconds)
        t_ours.append(mine["seconds"])
        faster += mine["seconds"] <= seconds
        if sorted(nodes) == sorted(mine["nodes"]) and sorted(edges) == sorted(mine["edges"]):
            rows["same"] += 1
            continue
        ref_value, my_value = net_value(inst, nodes, edges), net_value(inst, mine["nodes"], mine["edges"])
        if my_value >= ref_value - 1e-9 * max(1.0, abs(ref_value)):
            rows["trellis_better"] += 1
        else:
            rows["trellis_worse"] += 1
            worse.append((i, inst.get("id"), ref_value, my_value))
    n = len(instances)
    summary = {
        "set": name,
        "instances": n,
        "nodes_mean": statistics.mean(len(x["prizes"]) for x in instances),
        "edges_mean": statistics.mean(len(x["edges"]) for x in instances),
        **rows,
        "pcst_fast_us_median": statistics.median(t_ref) * 1e6,
        "trellis_us_median": statistics.median(t_ours) * 1e6,
        "pcst_fast_s_total": sum(t_ref),
        "trellis_s_total": sum(t_ours),
        "trellis_at_least_as_fast": faster,
    }
    return summary, worse, reference


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trellis-pcst", required=True, help="the trellis-pcst binary")
    ap.add_argument("--random", type=int, default=300, help="random instances per pruning")
    ap.add_argument("--max-nodes", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per instance (median)")
    ap.add_argument("--real", nargs="*", default=[], help="instance files from `trellis-pcst instances`")
    ap.add_argument("--write-fixture", help="write small random instances and pcst_fast's answers here")
    ap.add_argument("--json", help="also write the summary rows here, as JSON")
    ap.add_argument("--force", action="store_true", help="let --write-fixture write over an existing file")
    args = ap.parse_args()
    if args.write_fixture and os.path.exists(args.write_fixture) and not args.force:
        sys.exit(f"check_pcst.py: {args.write_fixture} exists: frozen test cases (src/graph/pcst.rs); --force rewrites it")
    sanity = {"prizes": [5.0, 0.0, 5.0, 7.0], "edges": [[0, 1], [1, 2], [2, 3]], "costs": [1.0] * 3, "num_clusters": 1, "pruning": "strong"}
    nodes, edges, _ = solve_reference(sanity, 1)
    if sorted(nodes) != [0, 1, 2, 3] or sorted(edges) != [0, 1, 2]:
        sys.exit(f"pcst_fast {getattr(pcst_fast, '__version__', '?')} with numpy {np.__version__} answers {nodes}, {edges} "
                 "on a path whose answer is every node and edge: use numpy < 2 (see the docstring)")

    rng = random.Random(args.seed)
    failed = False
    results = []
    for family in ["random", "random-ties"] if args.random > 0 else []:
        for pruning in PRUNINGS:
            # Sizes spread log-uniformly from 2 nodes to --max-nodes.
            sizes = [max(2, int(round(args.max_nodes ** rng.random()))) for _ in range(args.random)]
            instances = [random_instance(rng, n, pruning, ties=family == "random-ties") for n in sizes]
            summary, worse, _ = compare(f"{family}/{pruning}", instances, args.trellis_pcst, args.repeat)
            results.append(summary)
            for w in worse:
                failed = True
                print(f"{family}/{pruning} instance {w[0]}: pcst_fast {w[2]:.6f} > trellis {w[3]:.6f}", file=sys.stderr)
    for path in args.real:
        with open(path) as f:
            base = [json.loads(line) for line in f if line.strip()]
        for pruning in PRUNINGS:
            instances = [dict(x, pruning=pruning) for x in base]
            summary, worse, _ = compare(f"{os.path.basename(path)}/{pruning}", instances, args.trellis_pcst, args.repeat)
            results.append(summary)
            for w in worse:
                failed = True
                print(f"{path}/{pruning} instance {w[1]}: pcst_fast {w[2]:.6f} > trellis {w[3]:.6f}", file=sys.stderr)
    if args.write_fixture:
        # Small instances, every pruning, with pcst_fast's answers: the unit test's reference.
        cases = []
        for i in range(240):
            inst = random_instance(rng, rng.randrange(2, 41), ["none", "simple", "gw", "strong"][i % 4], ties=i % 8 >= 4)
            nodes, edges, _ = solve_reference(inst, 1)
            cases.append(dict(inst, nodes=nodes, edges_chosen=edges))
        with open(args.write_fixture, "w") as f:
            json.dump({"generator": "tools/reference/check_pcst.py", "pcst_fast": "1.0.10", "cases": cases}, f, separators=(",", ":"))
            f.write("\n")
    print("| instances | n | mean nodes | mean edges | same | Trellis better | Trellis worse | pcst_fast median | Trellis median | Trellis at least as fast |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['set']} | {r['instances']} | {r['nodes_mean']:.0f} | {r['edges_mean']:.0f} | {r['same']} | {r['trellis_better']} | "
            f"{r['trellis_worse']} | {r['pcst_fast_us_median']:.1f} µs | {r['trellis_us_median']:.1f} µs | "
            f"{r['trellis_at_least_as_fast']}/{r['instances']} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
