#!/usr/bin/env python3
"""Turn an OpenDialKG dialogs csv into `trellis retrieve` requests (JSON lines).

The samples are exactly those of Trellis's own reader (src/eval/opendialkg.rs): one per
event of type "action" whose metadata.path[1] is a non-empty list of [s, r, o] string
triples; its history is every *chat* message of the dialog before that event.

Each output line is {"id": "DIALOG:SAMPLE", "upto": N, "history": [text, ...],
"gold": [[s, r, o], ...]}: DIALOG is the 0-based data row, SAMPLE the 0-based sample
within the dialog (two actions may follow the same message, so `upto` alone is not a
key). `trellis retrieve` ignores the fields it does not know.

`--actions assistant|user` keeps only that side's actions, as `trellis eval --actions`
does (the ids keep counting every sample, so they match across settings).

Usage: python3 tools/data/opendialkg_requests.py dialogs_dev.csv [--actions all] > requests.jsonl
"""

import argparse
import csv
import json
import sys


def gold_path(metadata):
    """metadata.path = [score, [[s, r, o], ...], rendering]; None when it is not that shape.

    Mirrors `path_of` in opendialkg.rs: any malformed triple discards the whole path.
    """
    if not isinstance(metadata, dict):
        return None
    path = metadata.get("path")
    if not isinstance(path, list) or len(path) < 2 or not isinstance(path[1], list):
        return None
    triples = []
    for t in path[1]:
        if not isinstance(t, list) or len(t) < 3 or not all(isinstance(x, str) for x in t[:3]):
            return None
        triples.append(t[:3])
    return triples


def samples(csv_path):
    """Yields (dialog index, sample index, upto, history texts, gold triples, sender)."""
    # Messages fields run to tens of kB; the default limit (128 kB) is close enough to bite.
    csv.field_size_limit(sys.maxsize)
    with open(csv_path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or "Messages" not in header:
            raise SystemExit(f"{csv_path}: no `Messages` column in the header")
        col = header.index("Messages")
        for d, row in enumerate(reader):
            line = reader.line_num
            if col >= len(row):
                raise SystemExit(f"{csv_path}:{line}: row has no Messages field")
            try:
                events = json.loads(row[col])
            except json.JSONDecodeError as e:
                raise SystemExit(f"{csv_path}:{line}: Messages is not JSON: {e}")
            messages, k = [], 0
            for ev in events:
                kind = ev.get("type") if isinstance(ev, dict) else None
                if not isinstance(kind, str):
                    raise SystemExit(f"{csv_path}:{line}: an event without a string \"type\"")
                if kind == "chat":
                    text = ev.get("message")
                    messages.append(text if isinstance(text, str) else "")
                elif kind == "action":
                    gold = gold_path(ev.get("metadata"))
                    if gold:
                        sender = ev.get("sender")
                        yield d, k, len(messages), list(messages), gold, sender if isinstance(sender, str) else ""
                        k += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dialogs", help="dialogs_*.csv of the OpenDialKG release")
    ap.add_argument("-o", "--output", help="output file (default: standard output)")
    ap.add_argument("--actions", choices=["all", "assistant", "user"], default="all", help="whose path actions (default: all)")
    args = ap.parse_args()
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    n = 0
    for d, k, upto, history, gold, sender in samples(args.dialogs):
        if args.actions != "all" and sender != args.actions:
            continue
        out.write(json.dumps({"id": f"{d}:{k}", "upto": upto, "history": history, "gold": gold}, ensure_ascii=False) + "\n")
        n += 1
    if out is not sys.stdout:
        out.close()
    print(f"wrote {n} requests", file=sys.stderr)


if __name__ == "__main__":
    main()
