#!/usr/bin/env python3
"""Prints tools/eval/fact_table.sh's reports as the results table (markdown).

    python3 tools/eval/fact_table.py OUT
"""
import json
import os
import sys

ROWS = [
    ("none", "no knowledge"), ("none-rewrite", "no knowledge, rewrite"),
    ("gold", "gold path"), ("gold-check5", "gold path, --gen-check 5"),
    ("best", "best retriever"), ("best-rewrite", "best retriever, rewrite"),
    ("best-check5", "best retriever, --gen-check 5"), ("best-rewrite-check5", "best retriever, rewrite, --gen-check 5"),
]


def f(x):
    return "-" if x is None else f"{x:.4f}"


def main():
    out = sys.argv[1]
    print("| replies | fact score | NEIP | claims (supported / refuted / NEI) | replies with claims | F1 | BLEU-4 | ROUGE-L | distinct | replies/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    refs = None
    for name, label in ROWS:
        path = os.path.join(out, name + ".json")
        if not os.path.exists(path):
            continue
        r = json.load(open(path))
        c = r["fact_check"]["replies"]
        refs = refs or r["fact_check"]["references"]
        s = r["responses"]
        print(f"| {label} | {f(c['fact_score'])} | {f(c['neip'])} | {c['supported']} / {c['refuted']} / {c['not_enough_info']} | "
              f"{c['replies_with_claims']} of {c['replies']} | {s['f1']:.4f} | {s['bleu_sacrebleu']['4']:.4f} | {s['rouge']['rougeL']:.4f} | "
              f"{s['distinct_replies']} | {r['replies_per_s']:.1f} |")
    if refs:
        print(f"| references | {f(refs['fact_score'])} | {f(refs['neip'])} | {refs['supported']} / {refs['refuted']} / "
              f"{refs['not_enough_info']} | {refs['replies_with_claims']} of {refs['replies']} | | | | | |")


if __name__ == "__main__":
    main()
