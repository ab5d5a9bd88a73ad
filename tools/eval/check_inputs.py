#!/usr/bin/env python3
"""`trellis check` inputs from OpenDialKG dev dialogs: every assistant reply with its history
(`--references`), or the replies of `trellis eval pipeline --predictions` (`--predictions`),
each as {"id", "history": the last 8 messages, "reply"}.

    python3 tools/eval/check_inputs.py --dialogs dialogs_dev.csv --references > refs.jsonl
    python3 tools/eval/check_inputs.py --dialogs dialogs_dev.csv --predictions pred.jsonl > gen.jsonl
"""
import argparse
import csv
import json
import sys


def dialogs(path):
    csv.field_size_limit(1 << 26)
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            msgs = [m for m in json.loads(row["Messages"]) if m.get("type") == "chat"]
            yield [{"speaker": m["sender"], "text": m.get("message", "")} for m in msgs]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dialogs", required=True)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--references", action="store_true")
    g.add_argument("--predictions")
    args = ap.parse_args()
    ds = list(dialogs(args.dialogs))
    out = sys.stdout
    if args.references:
        for d, msgs in enumerate(ds):
            for i, m in enumerate(msgs):
                if m["speaker"] == "assistant" and i > 0:
                    out.write(json.dumps({"id": f"{d}:{i}", "history": msgs[max(0, i - 8):i], "reply": m["text"]}) + "\n")
        return
    with open(args.predictions, encoding="utf-8") as f:
        for line in f:
            p = json.loads(line)
            msgs = ds[p["dialog"]][:p["upto"]]
            out.write(json.dumps({"id": f"{p['dialog']}:{p['upto']}", "history": msgs[-8:], "reply": p["response"]}) + "\n")


if __name__ == "__main__":
    main()
