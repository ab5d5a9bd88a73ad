#!/usr/bin/env python3
"""Trains the subgraph model `--retriever surge` runs (schema/model.md, "Subgraph models"):
SURGE's context-relevant subgraph retriever (seed 001, section 3.3 and appendix D), on the
OpenDialKG training dialogs only.

    PY=$(bash tools/venv.sh train)
    $PY tools/train/surge.py spec  --init HF --tokenizer T --out SPEC        # what `trellis targets` reads
    trellis targets --store S --model SPEC --input dialogs_train.csv --output train.jsonl
    $PY tools/train/surge.py train --run RUN --init HF --targets train.jsonl --dev-targets dev.jsonl
    $PY tools/train/surge.py ship  --run RUN --out models/surge-opendialkg

(tools/train/surge.sh runs the whole thing.)

The model, as the paper has it, at engine size:
- the dialog: a T5 encoder (a trained generator's, frozen, as SURGE freezes T5-small) over
  the query text (`trellis targets` writes its ids), pooled by attention (a two-layer MLP
  gives each token a weight, softmax over the tokens), then a linear map: q;
- nodes and edges: an entity starts from the mean of its name's token embeddings (the
  encoder's own table) plus a learned vector when the dialog mentions it (SURGE takes the
  mention's contextual vector and zero otherwise; the engine knows which entities are
  linked, not where); a relation from its name the same way (SURGE learns one vector per
  relation id, which would tie the model to one store's ids);
- message passing, `--layers` times: each node gathers, over its facts in both directions,
  the neighbour's vector composed with the relation's (CompGCN's subtraction for the
  inverse direction, one shared linear map), normalized by its degree; each fact (an edge
  of the dual hypergraph, EHGNN) gathers the mean of the facts that share its entities;
- a fact: MLP([head || relation || tail]) -> d(z); its score q . d(z) (SURGE's eq. 3-4).

A path scores the mean of its facts' scores (what the engine computes). Loss: softmax
cross-entropy over every candidate path of the turn, the gold one the target (SURGE's
supervised retrieval loss, over paths since path@k is what is measured). Turns whose gold
path is not a candidate are skipped (`trellis targets` marks them). After every epoch, dev
path@1/3/5 and MRR over all dev turns (a skipped one counts as a miss) from the same
scores; the best epoch by path@1 is kept. Resumable (train.py's Checkpoint and loop: rerun
the same command), seeded.
"""
import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# Neighbours in tools/train/ (this file runs as a script: its folder is on sys.path).
from train import Checkpoint, fit, keep_epoch, log, optimizer, shuffled, stop_after  # noqa: E402

INPUTS = ["input_ids", "attention_mask", "entity_ids", "entity_mask", "entity_mentioned", "relation_ids", "relation_mask",
          "fact_head", "fact_relation", "fact_tail"]

# The graph's dynamic dimensions (schema/model.md, "Subgraph models").
AXES = {
    "input_ids": {1: "sequence"}, "attention_mask": {1: "sequence"},
    "entity_ids": {0: "entities", 1: "entity_tokens"}, "entity_mask": {0: "entities", 1: "entity_tokens"},
    "entity_mentioned": {0: "entities"},
    "relation_ids": {0: "relations", 1: "relation_tokens"}, "relation_mask": {0: "relations", 1: "relation_tokens"},
    "fact_head": {0: "facts"}, "fact_relation": {0: "facts"}, "fact_tail": {0: "facts"}, "fact_scores": {0: "facts"},
}


class Surge(torch.nn.Module):
    """The graph a subgraph model ships: the ten inputs of schema/model.md to `fact_scores`."""

    def __init__(self, encoder, width=128, layers=2, train_encoder=False):
        super().__init__()
        d = encoder.config.d_model
        self.encoder = encoder
        for p in encoder.parameters():
            p.requires_grad_(train_encoder)
        lin = torch.nn.Linear
        self.attend = torch.nn.Sequential(lin(d, d), torch.nn.ReLU(), lin(d, 1))
        self.query = lin(d, width)
        self.entity_in = lin(d, width)
        self.mentioned = torch.nn.Parameter(torch.zeros(width))
        self.relation_in = lin(d, width)
        self.node_self = torch.nn.ModuleList(lin(width, width) for _ in range(layers))
        self.node_msg = torch.nn.ModuleList(lin(width, width) for _ in range(layers))
        self.node_rel = torch.nn.ModuleList(lin(width, width, bias=False) for _ in range(layers))
        self.node_norm = torch.nn.ModuleList(torch.nn.LayerNorm(width) for _ in range(layers))
        self.edge_self = torch.nn.ModuleList(lin(width, width) for _ in range(layers))
        self.edge_node = torch.nn.ModuleList(lin(width, width, bias=False) for _ in range(layers))
        self.edge_norm = torch.nn.ModuleList(torch.nn.LayerNorm(width) for _ in range(layers))
        self.triple = torch.nn.Sequential(lin(3 * width, width), torch.nn.ReLU(), lin(width, width))

    def names(self, ids, mask):
        """Mean of a name's token embeddings (an empty name: zeros)."""
        m = mask.unsqueeze(-1).to(torch.float32)
        return (self.encoder.shared(ids) * m).sum(1) / m.sum(1).clamp(min=1.0)

    def forward(self, input_ids, attention_mask, entity_ids, entity_mask, entity_mentioned, relation_ids, relation_mask, fact_head, fact_relation, fact_tail):
        z = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[0]
        w = self.attend(z).squeeze(-1).masked_fill(attention_mask[0] == 0, -1e9)
        q = self.query((torch.softmax(w, dim=0).unsqueeze(-1) * z).sum(0))
        e = self.entity_in(self.names(entity_ids, entity_mask)) + entity_mentioned.unsqueeze(-1) * self.mentioned
        r = self.relation_in(self.names(relation_ids, relation_mask)).index_select(0, fact_relation)
        # Sums over a node's facts as scatter-adds and a fact's ends as gathers: linear in the
        # subgraph (exports before 2026-11-29 multiplied by [facts, entities] one-hot
        # matrices, quadratic; tools/train/surge_sparse.py rewrites those).
        n = e.shape[0]
        ones = torch.ones(fact_head.shape[0], 1, dtype=e.dtype)
        degree = (to_nodes(ones, fact_head, n) + to_nodes(ones, fact_tail, n)).clamp(min=1.0)
        for k in range(len(self.node_self)):
            rel = self.node_rel[k](r)
            to_tail = self.node_msg[k](e.index_select(0, fact_head)) + rel
            to_head = self.node_msg[k](e.index_select(0, fact_tail)) - rel
            gathered = (to_nodes(to_tail, fact_tail, n) + to_nodes(to_head, fact_head, n)) / degree
            e = e + torch.relu(self.node_norm[k](self.node_self[k](e) + gathered))
            around = (to_nodes(r, fact_head, n) + to_nodes(r, fact_tail, n)) / degree
            shared = (around.index_select(0, fact_head) + around.index_select(0, fact_tail)) / 2.0
            r = r + torch.relu(self.edge_norm[k](self.edge_self[k](r) + self.edge_node[k](shared)))
        d = self.triple(torch.cat([e.index_select(0, fact_head), r, e.index_select(0, fact_tail)], dim=-1))
        return d @ q


def to_nodes(x, index, n):
    """Row i of the result: the sum of the rows of `x` whose `index` is i (n rows). As
    scatter_add, which exports as ScatterElements with reduction add (torch's export of
    index_add keeps one row of each repeated index, not the sum)."""
    return torch.zeros(n, x.shape[-1], dtype=x.dtype).scatter_add(0, index.unsqueeze(1).expand(-1, x.shape[-1]), x)


def load_encoder(init):
    from transformers import T5EncoderModel

    enc = T5EncoderModel.from_pretrained(str(init))
    enc.config.use_cache = False
    return enc


def spec(max_length, turns, name_length):
    return {"format": 1, "task": "subgraph", "subgraph": {"max_length": max_length, "turns": turns, "name_length": name_length}}


def write_spec(args):
    """A directory `trellis targets` reads: tokenizer.json, config.json, trellis.json."""
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    cfg = load_encoder(args.init).config
    cfg.dropout_rate = 0.0
    cfg.architectures = ["T5EncoderModel"]
    cfg.to_json_file(out / "config.json")
    shutil.copyfile(args.tokenizer, out / "tokenizer.json")
    (out / "trellis.json").write_text(json.dumps(spec(args.max_length, args.turns, args.name_length), indent=2) + "\n")
    print(f"spec: {out}", file=sys.stderr)


# ---------------------------------------------------------------------------------------
# Data: `trellis targets` lines, the engine's own inputs.


def padded(rows, pad_id=0):
    """Rows of ids to (ids, mask), padded to the longest (at least one column), as the engine pads names."""
    n = max([len(r) for r in rows] + [1])
    ids = np.full((len(rows), n), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), n), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    return ids, mask


def read_targets(path, limit=None):
    """Every line of a targets file, its arrays as numpy (a list of ints costs 10x more)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if limit is not None and len(out) >= limit:
                break
            t = json.loads(line)
            row = {"key": f"{t['dialog']}:{t['upto']}", "gold": t.get("gold"), "skipped": t.get("skipped")}
            if row["skipped"] is None:
                eids, emask = padded(t["entity_ids"])
                rids, rmask = padded(t["relation_ids"])
                paths = t["paths"]
                row.update(
                    input_ids=np.array([t["input_ids"]], dtype=np.int64),
                    entity_ids=eids, entity_mask=emask, entity_mentioned=np.array(t["entity_mentioned"], dtype=np.float32),
                    relation_ids=rids, relation_mask=rmask,
                    fact_head=np.array(t["fact_head"], dtype=np.int64), fact_relation=np.array(t["fact_relation"], dtype=np.int64),
                    fact_tail=np.array(t["fact_tail"], dtype=np.int64),
                    first=np.array([p[0] for p in paths], dtype=np.int64), last=np.array([p[-1] for p in paths], dtype=np.int64),
                )
            out.append(row)
    return out


def inputs_of(row):
    x = {k: torch.from_numpy(row[k]) for k in INPUTS if k != "attention_mask"}
    x["attention_mask"] = torch.ones_like(x["input_ids"])
    return [x[k] for k in INPUTS]


def path_scores(model, row):
    """Each candidate path's score: the mean of its (one or two) facts' scores."""
    s = model(*inputs_of(row))
    return (s.index_select(0, torch.from_numpy(row["first"])) + s.index_select(0, torch.from_numpy(row["last"]))) / 2.0


def evaluate(model, rows):
    """path@1/3/5 and the MRR of the exact gold path over every turn (a skipped one a miss),
    ties broken by candidate order as the engine's stable sort. (`trellis eval retrieval`'s
    MRR is the rank of the first path holding a gold triple: higher.)"""
    model.eval()
    hits = {1: 0, 3: 0, 5: 0}
    rr = 0.0
    with torch.no_grad():
        for row in rows:
            if row["skipped"] is not None:
                continue
            s = path_scores(model, row).numpy().astype(np.float64)
            g = row["gold"]
            rank = 1 + int((s > s[g]).sum()) + int((s[:g] == s[g]).sum())
            for k in hits:
                hits[k] += rank <= k
            rr += 1.0 / rank
    n = max(len(rows), 1)
    return {"turns": len(rows), "path_at": {str(k): v / n for k, v in hits.items()}, "mrr": rr / n}


# ---------------------------------------------------------------------------------------
# Export.


def gemm_to_matmul(m):
    """Every Gemm(A, B, C) with constant B (alpha = beta = 1) as MatMul(A, B') + C, where B'
    is B transposed when transB says so."""
    from onnx import helper, numpy_helper

    inits = {i.name: i for i in m.graph.initializer}
    nodes = []
    for n in m.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type != "Gemm" or n.input[1] not in inits or attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
            nodes.append(n)
            continue
        w = numpy_helper.to_array(inits[n.input[1]])
        if attrs.get("transB", 0):
            w = w.T.copy()
        name = n.input[1] + "_for_matmul"
        m.graph.initializer.append(numpy_helper.from_array(w, name))
        if len(n.input) > 2 and n.input[2]:
            mid = n.output[0] + "_product"
            nodes.append(helper.make_node("MatMul", [n.input[0], name], [mid], name=n.name + "_matmul"))
            nodes.append(helper.make_node("Add", [mid, n.input[2]], [n.output[0]], name=n.name + "_bias"))
        else:
            nodes.append(helper.make_node("MatMul", [n.input[0], name], [n.output[0]], name=n.name + "_matmul"))
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    used = {i for n in m.graph.node for i in n.input}
    keep = [i for i in m.graph.initializer if i.name in used]
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)


def export(model, rows, out, quantize, max_length, turns, name_length, tok_path):
    """model.onnx (int8 weights when `quantize`), checked with onnxruntime against PyTorch on
    real dev subgraphs of different sizes (scores within tolerance, the same top path),
    then config.json, tokenizer.json, trellis.json."""
    import onnx
    import onnxruntime as ort

    model = model.eval()
    checks = [r for r in rows if r["skipped"] is None][:8]
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "model.onnx"
        example = inputs_of(checks[0])
        with torch.no_grad():
            torch.onnx.export(model, tuple(example), str(f), input_names=INPUTS, output_names=["fact_scores"], dynamic_axes=AXES,
                              opset_version=18, dynamo=False)
        if quantize:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            q = Path(tmp) / "model.q.onnx"
            # quantize_dynamic rewrites Gemm (torch's Linear on 2-D inputs) as MatMul + Add
            # but drops transB, which a square weight survives silently: do it here, right.
            m = onnx.load(str(f))
            gemm_to_matmul(m)
            onnx.save(m, str(f))
            # int8: the dialog encoder's weight products and the embedding table (most of the
            # bytes). The graph network's layers stay float: small, and their int8 error
            # (per-tensor activation scales over a whole subgraph) moves scores by a few
            # percent, enough to reorder close paths. No per-row activation scales
            # (row_quant.py) are needed: a run holds one request.
            g = m.graph
            weights = {i.name for i in g.initializer}
            chosen = [n.name for n in g.node if any(x in weights for x in n.input)
                      and ((n.op_type == "MatMul" and n.name.startswith("/encoder/")) or n.op_type == "Gather")]
            quantize_dynamic(str(f), str(q), weight_type=QuantType.QInt8, per_channel=False, nodes_to_quantize=chosen)
            m = onnx.load(str(q))
            onnx.checker.check_model(m)
            onnx.save(m, str(f))
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(str(f), so, providers=["CPUExecutionProvider"])
        worst, same_top = 0.0, 0
        for row in checks:
            with torch.no_grad():
                ref = model(*inputs_of(row)).numpy()
            got = sess.run(["fact_scores"], {k: v.numpy() for k, v in zip(INPUTS, inputs_of(row))})[0]
            worst = max(worst, float(np.abs(ref - got).max() / max(1.0, np.abs(ref).max())))
            same_top += int(ref.argmax() == got.argmax())
        tol = 0.05 if quantize else 1e-4
        assert worst < tol, f"onnxruntime differs from PyTorch by {worst} (relative; tolerance {tol})"
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        shutil.copy(f, out / "model.onnx")
    cfg = model.encoder.config
    cfg.dropout_rate = 0.0
    cfg.architectures = ["T5EncoderModel"]
    cfg.to_json_file(out / "config.json")
    shutil.copyfile(tok_path, out / "tokenizer.json")
    (out / "trellis.json").write_text(json.dumps(spec(max_length, turns, name_length), indent=2) + "\n")
    return worst, same_top, len(checks)


# ---------------------------------------------------------------------------------------
# Training.


def train(args):
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    rows = [r for r in read_targets(args.targets, args.limit) if r["skipped"] is None]
    dev_rows = read_targets(args.dev_targets, args.dev_turns or None)
    out = Path(args.run) / "surge"
    ck = Checkpoint(out)
    model = Surge(load_encoder(args.init), width=args.width, layers=args.layers, train_encoder=args.train_encoder)
    batches, per_epoch = shuffled(rows, args.batch, args.seed)
    steps = per_epoch * args.epochs
    opt, sched = optimizer(model, args.lr, steps)
    state = ck.load(model, opt, sched) or {"step": 0, "loss": None, "best": None, "history": []}
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    log(f"surge: {len(rows)} training turns with the gold path among the candidates, {len(dev_rows)} dev turns, {trainable:,} trained parameters, "
        f"{per_epoch} steps an epoch, {args.epochs} epochs, batch {args.batch}, lr {args.lr}, from step {state['step']}")

    def loss_of(batch):
        total = 0.0
        for row in batch:
            s = path_scores(model, row)
            total = total + F.cross_entropy(s.unsqueeze(0), torch.tensor([row["gold"]]))
        return total / len(batch)

    started = time.time()

    def epoch_end(epoch, done):
        folder = out / f"epoch-{epoch + 1}"
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), folder / "weights.pt")
        scores = evaluate(model, dev_rows)
        worst, same, n = export(model, dev_rows, folder / "model", not args.float, args.max_length, args.turns, args.name_length, args.tokenizer)
        model.train()
        log(f"epoch {epoch + 1}: dev {json.dumps(scores)}; export max relative diff {worst:.2e}, same top fact on {same} of {n}")
        keep_epoch(out, epoch, [scores["path_at"]["1"], scores["path_at"]["3"]], scores, state, args, started, save)
        return bool(args.stop_after and done >= args.stop_after)

    def save():
        ck.save(model, opt, sched, state)

    between = stop_after(args, save, "surge")

    if fit(model, opt, sched, ck, state, args, steps=steps, per_epoch=per_epoch, batches=batches, loss_of=loss_of,
           label=lambda e: f"surge epoch {e + 1}", between=between, epoch_end=epoch_end):
        log(f"surge: done; best epoch {state['best']['epoch']} ({out / 'best'})")


def ship(args):
    """The best epoch's model directory to `--out`, with a model card."""
    run = Path(args.run) / "surge"
    hist = json.loads((run / "history.json").read_text())
    best = run / "best" / "model"
    if args.out.exists():
        shutil.rmtree(args.out)
    shutil.copytree(best, args.out)
    size = sum(f.stat().st_size for f in args.out.iterdir())
    a, b = hist["args"], hist["best"]["epoch"]
    rows = "\n".join(
        f"| {h['epoch']} | {h['step']} | {h['loss']:.4f} | {h['minutes']} | {h['dev']['path_at']['1']:.4f} | {h['dev']['path_at']['3']:.4f} | "
        f"{h['dev']['path_at']['5']:.4f} | {h['dev']['mrr']:.4f} |" for h in hist["history"])
    (args.out / "README.md").write_text(f"""# surge-opendialkg

SURGE's context-relevant subgraph retriever (seed 001, section 3.3) for `--retriever surge
--surge-model models/surge-opendialkg`: the dialog and the turn's candidate subgraph in, one
score per fact out (schema/model.md, "Subgraph models"); a path scores the mean of its facts.
Made by `tools/train/surge.py` (its docstring says the architecture and where it departs from
the paper), {size / 1e6:.1f} MB, int8 weights.

- Dialog encoder: the encoder of the shipped generator's training run (epoch 6 of the
  delexicalized generator; T5, d_model 256, 3 layers), frozen, with attention pooling;
  GNN width {a['width']}, {a['layers']} message-passing layers.
- Data: OpenDialKG `dialogs_train.csv` only, the turns whose gold path is among the capped
  candidates (`trellis targets` on the training store, kg.tsv + kg_train_paths.tsv); loss:
  softmax cross-entropy over all the turn's candidate paths.
- Trained {len(hist['history'])} epochs on 2 CPU cores (lr {a['lr']}, batch {a['batch']}, seed {a['seed']}); epoch {b}
  shipped, chosen by dev path@1 (python scores of the float model over the dev turns, a turn
  whose gold is not a candidate a miss):

| epoch | step | loss | minutes | dev path@1 | path@3 | path@5 | MRR of the exact path |
|---|---|---|---|---|---|---|---|
{rows}

The engine's figures (`trellis eval retrieval --retriever surge`) are in the results docs.
""")
    print(f"ship: {args.out} from {best.resolve()} (epoch {b}, {size / 1e6:.1f} MB)", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("spec")
    p.add_argument("--init", type=Path, required=True, help="a saved T5 (its config)")
    p.add_argument("--tokenizer", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    for q in (p, p_train := sub.add_parser("train")):
        q.add_argument("--max-length", type=int, default=128)
        q.add_argument("--turns", type=int, default=3)
        q.add_argument("--name-length", type=int, default=16)
    p = p_train
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--init", type=Path, required=True)
    p.add_argument("--tokenizer", type=Path, required=True)
    p.add_argument("--targets", type=Path, required=True)
    p.add_argument("--dev-targets", type=Path, required=True)
    p.add_argument("--dev-turns", type=int, default=0, help="the first this many dev turns (0: all)")
    p.add_argument("--seed", type=int, default=20261126)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--train-encoder", action="store_true", help="train the dialog encoder too (SURGE freezes it)")
    p.add_argument("--limit", type=int, help="the first this many training turns (smoke tests)")
    p.add_argument("--float", action="store_true", help="export float weights (default int8)")
    p.add_argument("--checkpoint-minutes", type=float, default=5)
    p.add_argument("--stop-after", type=int, help="checkpoint and stop after this many steps of this run")
    p = sub.add_parser("ship")
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    {"spec": write_spec, "train": train, "ship": ship}[args.cmd](args)


if __name__ == "__main__":
    main()
