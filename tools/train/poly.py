#!/usr/bin/env python3
"""Does SURGE's poly-encoder earn its place over the bi-encoder on dev? (issue 23)

SURGE compares a bi-encoder and a poly-encoder (Humeau et al., 2020) as dense retrievers.
The two differ only in how a query's token vectors meet a candidate's vector: the
bi-encoder mean-pools the query (what `--retriever dense` runs), the poly-encoder lets m
learned codes attend over the query's tokens and the candidate's vector attend over those m
code vectors. This experiment compares the heads on one encoder: the shipped bi-encoder
(models/dense-opendialkg, its int8 ONNX run by onnxruntime as the engine runs it) is frozen;
the poly head is trained on its token vectors with the bi-encoder's loss and data (InfoNCE at
the bi-encoder's temperature over the gold path, the turn's hard negatives and every other
path of the batch; `encoders.py prepare`'s rows.jsonl). Then both rank every candidate path
of the first `--dev-turns` dev turns (`trellis retrieve --retriever all --top 1000`: the
capped candidate subgraph `--retriever dense` ranks, cut at 1,000 paths).

The head's query vector is the normalized attention-weighted mix of the code vectors, so
with every code attending uniformly it is exactly the bi-encoder's pooled query: the codes
start near zero (the bi-encoder's ranking) and training can only move away from it where
the training loss says so.

    PY=$(bash tools/venv.sh train)
    $PY tools/train/poly.py --rows RUN/rows.jsonl --model models/dense-opendialkg \
        --dev-requests RUN/req-dev.jsonl --dev-candidates RUN/all-dev.jsonl --out RUN/poly

(tools/train/poly.sh makes the inputs and runs it.) Writes OUT/report.json and prints a
markdown table: path@1/3/5 and MRR of the bi-encoder and of the poly head after each epoch.
"""
import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
import torch.nn.functional as F

from encoders import path_text, query_text, stored, tensors, tokenizer
from train import log


class Frozen:
    """The shipped bi-encoder as the engine runs it: its tokenizer's truncation, token vectors
    from the ONNX graph, each text encoded once."""

    def __init__(self, model_dir, threads):
        spec = json.loads((model_dir / "trellis.json").read_text())["dense"]
        self.max_length, self.turns = spec["max_length"], spec["turns"]
        self.tok = tokenizer(model_dir / "tokenizer.json", self.max_length)
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        self.sess = ort.InferenceSession(str(model_dir / "model.onnx"), so, providers=["CPUExecutionProvider"])

    def run(self, texts, keep, batch=64):
        """keep(token vectors [length, d]) of each text, batched by length."""
        encs = self.tok.encode_batch(list(texts))
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
        out = [None] * len(encs)
        for s in range(0, len(order), batch):
            idx = order[s : s + batch]
            ids, mask = tensors([encs[i] for i in idx])
            h = self.sess.run(["last_hidden_state"], {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
            for r, i in enumerate(idx):
                out[i] = keep(h[r, : len(encs[i].ids)])
        return out

    def tokens(self, texts):
        """Each text's token vectors (float16: the training queries are all kept)."""
        return self.run(texts, lambda h: h.astype(np.float16))

    def pooled(self, texts):
        """The engine's path vectors: mean of the token vectors, normalized."""
        v = np.stack(self.run(texts, lambda h: h.mean(0)))
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def padded(mats):
    n = max(m.shape[0] for m in mats)
    h = torch.zeros(len(mats), n, mats[0].shape[1])
    mask = torch.zeros(len(mats), n, dtype=torch.bool)
    for i, m in enumerate(mats):
        h[i, : m.shape[0]] = torch.from_numpy(m.astype(np.float32))
        mask[i, : m.shape[0]] = True
    return h, mask


class PolyHead(torch.nn.Module):
    """m codes attend over the query's tokens; each candidate attends over the m code vectors;
    the score is the normalized mix against the candidate's (normalized) vector."""

    def __init__(self, codes, d, seed):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.codes = torch.nn.Parameter(torch.randn(codes, d, generator=g) * 1e-3)

    def forward(self, h, mask, cands):
        att = torch.einsum("md,bld->bml", self.codes, h).masked_fill(~mask[:, None, :], float("-inf"))
        y = torch.einsum("bml,bld->bmd", att.softmax(-1), h)  # [B, m, d]
        w = torch.einsum("nd,bmd->bnm", cands, y).softmax(-1)
        q = F.normalize(torch.einsum("bnm,bmd->bnd", w, y), dim=-1)
        return torch.einsum("bnd,nd->bn", q, cands)


def bi_scores(h, mask, cands):
    m = mask[..., None].float()
    q = F.normalize((h * m).sum(1) / m.sum(1).clamp(min=1e-9), dim=-1)
    return q @ cands.T


def ranks_metrics(ranks, n):
    """path@k over all n turns (a turn whose gold is not a candidate counts as a miss), MRR."""
    at = {k: sum(1 for r in ranks if r is not None and r < k) / n for k in (1, 3, 5, 10)}
    return {"turns": n, "path_at": {str(k): v for k, v in at.items()}, "mrr": sum(1 / (r + 1) for r in ranks if r is not None) / n}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=Path, required=True, help="encoders.py prepare's rows.jsonl (training turns)")
    ap.add_argument("--model", type=Path, required=True, help="the bi-encoder (an exported dense model directory)")
    ap.add_argument("--dev-requests", type=Path, required=True, help="tools/data/opendialkg_requests.py on the dev dialogs")
    ap.add_argument("--dev-candidates", type=Path, required=True, help="`trellis retrieve --retriever all --top 1000` on those requests")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--turns", type=int, default=6000, help="training turns (the first this many rows)")
    ap.add_argument("--dev-turns", type=int, default=1000)
    ap.add_argument("--codes", type=int, default=16)
    ap.add_argument("--negatives", type=int, default=7)
    ap.add_argument("--pool", type=int, default=60)
    ap.add_argument("--temperature", type=float, default=0.05)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    enc = Frozen(args.model, args.threads)
    t0 = time.time()

    # Training data: each turn's query tokens, its gold and drawn negatives (fixed draw).
    rows = []
    with open(args.rows, encoding="utf-8") as f:
        for line in f:
            if len(rows) >= args.turns:
                break
            rows.append(json.loads(line))
    rng = random.Random(args.seed)
    texts = [[r["gold"]] + rng.sample(r["cands"][: args.pool], min(args.negatives, len(r["cands"][: args.pool]))) for r in rows]
    q_tokens = enc.tokens([query_text(r["history"], enc.turns) for r in rows])
    uniq = sorted({t for ts in texts for t in ts})
    vec = dict(zip(uniq, enc.pooled(uniq)))
    log(f"poly: {len(rows)} training turns, {len(uniq)} path texts encoded ({time.time() - t0:.0f} s)")

    # Dev: each turn's candidate paths and the gold's position among them.
    dev = []
    with open(args.dev_requests, encoding="utf-8") as fr, open(args.dev_candidates, encoding="utf-8") as fc:
        for req_line, cand_line in zip(fr, fc):
            if len(dev) >= args.dev_turns:
                break
            req, ans = json.loads(req_line), json.loads(cand_line)
            if req["id"] != ans["id"]:
                raise SystemExit(f"{args.dev_candidates}: answer {ans['id']} for request {req['id']} (another requests file?)")
            gold = [stored(t) for t in req["gold"]]
            facts = [[(t["head"], t["relation"], t["tail"]) for t in p["triples"]] for p in ans["paths"]]
            dev.append({"query": query_text(req["history"], enc.turns), "paths": [path_text(p) for p in facts],
                        "gold": next((i for i, p in enumerate(facts) if p == gold), None)})
    dev_q = enc.tokens([d["query"] for d in dev])
    dev_uniq = sorted({p for d in dev for p in d["paths"]})
    dev_vec = dict(zip(dev_uniq, enc.pooled(dev_uniq)))
    log(f"poly: {len(dev)} dev turns, {len(dev_uniq)} candidate texts encoded ({time.time() - t0:.0f} s)")

    def dev_eval(score):
        ranks = []
        with torch.no_grad():
            for d, qt in zip(dev, dev_q):
                if not d["paths"]:
                    ranks.append(None)
                    continue
                h, m = padded([qt])
                s = score(h, m, torch.from_numpy(np.stack([dev_vec[p] for p in d["paths"]])))[0]
                # Ties keep candidate order (the engine's stable sort).
                order = sorted(range(len(s)), key=lambda i: (-float(s[i]), i))
                ranks.append(order.index(d["gold"]) if d["gold"] is not None else None)
        return ranks_metrics(ranks, len(dev))

    report = {"args": {k: str(v) for k, v in vars(args).items()}, "bi": dev_eval(bi_scores), "poly": []}
    log(f"bi-encoder: {json.dumps(report['bi'])}")
    head = PolyHead(args.codes, q_tokens[0].shape[1], args.seed)
    report["poly"].append(dict(dev_eval(head), epoch=0))
    opt = torch.optim.Adam(head.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        order = list(range(len(rows)))
        random.Random(f"{args.seed}:{epoch}").shuffle(order)
        total, steps = 0.0, 0
        for s in range(0, len(order), args.batch):
            idx = order[s : s + args.batch]
            flat = [t for i in idx for t in texts[i]]
            cands = torch.from_numpy(np.stack([vec[t] for t in flat]))
            h, m = padded([q_tokens[i] for i in idx])
            scores = head(h, m, cands) / args.temperature
            starts = torch.tensor([sum(len(texts[j]) for j in idx[:k]) for k in range(len(idx))])
            same = torch.tensor([[t == texts[i][0] for t in flat] for i in idx])
            same[torch.arange(len(idx)), starts] = False
            loss = F.cross_entropy(scores.masked_fill(same, float("-inf")), starts)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, steps = total + loss.item(), steps + 1
        r = dict(dev_eval(head), epoch=epoch, train_loss=total / steps)
        report["poly"].append(r)
        log(f"poly epoch {epoch}: train loss {total / steps:.4f}; dev {json.dumps(r)}")
    report["seconds"] = round(time.time() - t0)
    (args.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    fmt = lambda r: " | ".join(f"{r['path_at'][k]:.4f}" for k in ("1", "3", "5")) + f" | {r['mrr']:.4f}"  # noqa: E731
    print(f"| head | dev turns | path@1 | path@3 | path@5 | MRR |\n|---|---|---|---|---|---|\n| bi-encoder (mean) | {len(dev)} | {fmt(report['bi'])} |")
    for r in report["poly"]:
        print(f"| poly-encoder, {args.codes} codes, epoch {r['epoch']} | {len(dev)} | {fmt(r)} |")


if __name__ == "__main__":
    sys.exit(main())
