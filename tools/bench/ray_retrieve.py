"""Batch retrieval four ways, side by side in one run on the same requests: `trellis retrieve`
(the command line), `Retriever.retrieve_batch` from Python, and `trellis.ray` with 1 and 2
actors on a local Ray cluster (started once, before the timings). Prints a markdown table:
turns/s of each (Ray: from the map's start, the actors' start-up and model loading
included, the cluster's start and the input's reading not), and each Ray actor's peak RSS (its own `ru_maxrss`, reported with every
batch it answers); checks that every way gives the command line's answers (same paths, same
scores, same order after sorting by id).

Run by tools/bench/ray_retrieve.sh (the `ray` environment, the package built into it).
Usage: python tools/bench/ray_retrieve.py --bin TRELLIS --store DIR --requests FILE
       [--retriever gsr] [--model DIR] [--turns 500] [--top 5]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import ray
import ray.data

import trellis
import trellis.ray


class MeasuredAnswerer(trellis.ray.Answerer):
    """trellis.ray's callable class, adding to every row its actor's pid and peak RSS."""

    def __call__(self, batch):
        out = super().__call__(batch)
        rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out["pid"] = [os.getpid()] * len(out["id"])
        out["rss_kb"] = [rss_kb] * len(out["id"])
        return out


def answers_by_id(rows):
    out = {}
    for r in rows:
        a = dict(r)
        a.pop("line", None)
        out[a["id"]] = a
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--requests", required=True)
    p.add_argument("--retriever", default="gsr")
    p.add_argument("--model")
    p.add_argument("--turns", type=int, default=500)
    p.add_argument("--top", type=int, default=5)
    args = p.parse_args()
    model = ["--model", args.model] if args.model else []
    tmp = tempfile.mkdtemp(prefix="trellis-ray-bench-")
    requests = os.path.join(tmp, "requests.jsonl")
    with open(args.requests, encoding="utf-8") as f, open(requests, "w", encoding="utf-8") as out:
        lines = [line for line in f if line.strip()][: args.turns]
        out.writelines(lines)
    n = len(lines)
    rows = []

    # The command line (its own process: model load and store open included, as a user runs it).
    cli_out = os.path.join(tmp, "cli.jsonl")
    t = time.perf_counter()
    subprocess.run([args.bin, "retrieve", "--store", args.store, "--retriever", args.retriever, *model, "--top", str(args.top), "--input", requests, "--output", cli_out], check=True, capture_output=True)
    cli_s = time.perf_counter() - t
    with open(cli_out, encoding="utf-8") as f:
        cli = answers_by_id(json.loads(line) for line in f if line.strip())
    rows.append(("`trellis retrieve` (command line)", n / cli_s, "-", "yes"))

    # Python, in this process: open and load, then the batch.
    t = time.perf_counter()
    store = trellis.Store.open_read_only(args.store)
    retriever = trellis.Retriever(store, args.retriever, model=args.model, top=args.top)
    with open(requests, encoding="utf-8") as f:
        reqs = [json.loads(line) for line in f]
    got = retriever.retrieve_batch(reqs)
    py_s = time.perf_counter() - t
    same = answers_by_id(got) == cli
    rows.append(("`Retriever.retrieve_batch` (Python)", n / py_s, "-", "yes" if same else "NO"))
    del retriever, store

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        for actors in (1, 2):
            # Read first: 2 actors of 1 CPU take both CPUs, and a read task queued behind
            # them would wait for ever (as `python -m trellis.ray` does too).
            ds = ray.data.read_json(requests).materialize()
            t = time.perf_counter()
            mapped = ds.map_batches(
                MeasuredAnswerer,
                fn_constructor_kwargs=dict(task="retrieve", store=args.store, retriever=args.retriever, model=args.model, generator=None, top=args.top, options={}, threads=None, on_error="stop"),
                batch_size=64,
                batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(size=actors),
                num_cpus=1,
            )
            out = mapped.take_all()
            ray_s = time.perf_counter() - t
            peak = {}
            for r in out:
                peak[r["pid"]] = max(peak.get(r["pid"], 0), r["rss_kb"])
            same = answers_by_id(json.loads(r["answer"]) for r in out) == cli and len(out) == n
            rss = ", ".join(f"{kb / 1024:.0f}" for kb in sorted(peak.values()))
            rows.append((f"`trellis.ray`, {actors} actor{'s' if actors > 1 else ''}", n / ray_s, rss, "yes" if same else "NO"))
    finally:
        ray.shutdown()

    print(f"{args.retriever}, top {args.top}, {n} requests of {args.requests}, store {args.store}")
    print()
    print("| way | turns/s | peak RSS per actor (MB) | answers equal to the command line's |")
    print("|---|---|---|---|")
    for name, rate, rss, same in rows:
        print(f"| {name} | {rate:.1f} | {rss} | {same} |")
    if any(r[3] != "yes" for r in rows):
        sys.exit("answers differ from the command line's")


if __name__ == "__main__":
    main()
