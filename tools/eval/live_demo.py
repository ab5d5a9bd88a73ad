"""Live knowledge on the dev dialogs: retract the gold path's facts of the first TURNS dev
path turns from the OpenDialKG store with `trellis update`, check that the shipped gsr,
surge, pcst and reranked retrievers answer none of them, add them back, and check that
path@1 returns to its value before. Markdown on stdout; the command is in its header.

    python3 tools/eval/live_demo.py --bin TRELLIS --work DIR [--turns 200]

Needs the store of the OpenDialKG graph with the shipped retriever's token index (made in
DIR when missing) and the shipped models under models/.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "opendialkg"
GSR = REPO / "models" / "gsr-opendialkg"

RETRIEVERS = {
    "gsr": ["--retriever", "gsr", "--model", str(GSR)],
    "surge": ["--retriever", "surge", "--surge-model", str(REPO / "models" / "surge-opendialkg")],
    "pcst": ["--retriever", "pcst"],
    "surge + rerank(gsr, pcst)": [
        "--retriever", "surge", "--surge-model", str(REPO / "models" / "surge-opendialkg"),
        "--model", str(GSR), "--rerank", str(REPO / "models" / "rerank-opendialkg"), "--rerank-pool", "gsr,pcst",
    ],
}


def stored(fact):
    """A fact in walking form (`~r` walks it backwards) as stored: (subject, relation, object)."""
    s, r, o = fact
    return (o, r[1:], s) if r.startswith("~") else (s, r, o)


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def evaluate(binary, store, flags, turns, out):
    t = time.time()
    res = json.loads(run([binary, "eval", "retrieval", "--store", str(store), "--input", str(DATA / "dialogs_dev.csv"),
                          "--max-turns", str(turns), "--turns", str(out), "--json", *flags]))
    rows = [json.loads(line) for line in open(out, encoding="utf-8")]
    return res, rows, time.time() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--turns", type=int, default=200)
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    store = work / "live-demo-kg"
    if not (store / "CURRENT").exists():
        run([args.bin, "ingest", "--store", str(store), "--on-error", "skip", str(DATA / "kg.tsv")])
        run([args.bin, "index-tokens", "--store", str(store), "--tokenizer", str(GSR / "tokenizer.json")])
    before = {}
    gold = set()
    for name, flags in RETRIEVERS.items():
        res, rows, secs = evaluate(args.bin, store, flags, args.turns, work / "before.jsonl")
        before[name] = (res, rows)
        for row in rows:
            if row["gold_in_store"]:
                gold.update(stored(tuple(f)) for f in row["gold"])
    turns = len(before["pcst"][1])
    changes = work / "retract.jsonl"
    with open(changes, "w", encoding="utf-8") as f:
        for s, r, o in sorted(gold):
            f.write(json.dumps({"op": "retract", "subject": s, "relation": r, "object": o}) + "\n")
    t = time.time()
    report = json.loads(run([args.bin, "update", "--store", str(store), "--changes", str(changes), "--json"]))
    retract_secs = time.time() - t
    after = {}
    for name, flags in RETRIEVERS.items():
        res, rows, secs = evaluate(args.bin, store, flags, args.turns, work / "after.jsonl")
        answered = sum(1 for row in rows for p in row["paths"] for fact in p["facts"] if stored(tuple(fact)) in gold)
        after[name] = (res, answered)
    with open(changes, "w", encoding="utf-8") as f:
        for s, r, o in sorted(gold):
            f.write(json.dumps({"op": "add", "subject": s, "relation": r, "object": o}) + "\n")
    t = time.time()
    run([args.bin, "update", "--store", str(store), "--changes", str(changes)])
    add_secs = time.time() - t
    again = {}
    for name, flags in RETRIEVERS.items():
        res, rows, secs = evaluate(args.bin, store, flags, args.turns, work / "again.jsonl")
        same = [r["paths"] for r in rows] == [r["paths"] for r in before[name][1]]
        again[name] = (res, same)
    run([args.bin, "validate", "--store", str(store)])
    print(f"Command: `python3 tools/eval/live_demo.py --bin target/release/trellis --work DIR --turns {args.turns}`\n")
    print(f"The first {turns} dev path turns; their gold paths hold {len(gold)} distinct stored facts, retracted by one "
          f"`trellis update` in {retract_secs:.2f} s ({report['counts']['facts_retracted']} facts) and added back by another "
          f"in {add_secs:.2f} s. Each retriever ranks its top 10 paths per turn.\n")
    print("| retriever | path@1 before | path@1 retracted | retracted facts in any answer | path@1 added back | answers identical to before |")
    print("|---|---|---|---|---|---|")
    for name in RETRIEVERS:
        b = before[name][0]["path_at"]["1"]
        a, n = after[name]
        g, same = again[name]
        print(f"| {name} | {b:.4f} | {a['path_at']['1']:.4f} | {n} | {g['path_at']['1']:.4f} | {'yes' if same else 'no'} |")


if __name__ == "__main__":
    sys.exit(main())
