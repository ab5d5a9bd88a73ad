#!/usr/bin/env python3
"""Rewrites a subgraph model's message passing from dense incidence products to gathers and
scatter-adds, the same function in time linear in the subgraph's size.

    PY=$(bash tools/venv.sh train)
    $PY tools/train/surge_sparse.py --model models/surge-opendialkg [--targets T.jsonl]

Exports of `tools/train/surge.py` before this tool built a [facts, entities] one-hot matrix
for the heads and one for the tails (`fact_head == arange(entities)`) and multiplied by them:
a node's messages (H^T X), a fact's neighbourhood (I (I^T X)), the degrees (sum of I). That is
quadratic in the subgraph: on a Freebase-sized store, where OpenDialKG's entities have more
neighbours, a turn's subgraph grows 1.5x and the model's time about 1.75x. Each product by a
one-hot matrix is a gather or a scatter-add of the same rows, so this tool replaces
- MatMul(Transpose(onehot of idx), X) by ScatterND(zeros[entities, width], idx, X, add),
- MatMul(onehot of idx, Y) by Gather(Y, idx),
- an incidence matrix (head one-hot + tail one-hot) by the sum of the two,
- ReduceSum(incidence, axis 0) by a scatter-add of ones,
and drops the matrices. Weights and inputs are untouched. Sums are taken in another order,
so scores move by float rounding only: the tool runs both graphs on the subgraphs of
`--targets` (`trellis targets` lines for this model) or on random subgraphs, refuses to write
when a score moves by more than 1e-4 of the largest, and prints the largest move and both
graphs' time. The model directory's model.onnx is replaced; the old one is kept beside it as
model.dense.onnx unless `--no-keep`.
"""
import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FACTS = ("fact_head", "fact_tail")


class Rewriter:
    def __init__(self, model):
        self.m = model
        self.g = model.graph
        self.producer = {o: n for n in self.g.node for o in n.output}
        self.new = []
        self.count = 0

    def fresh(self, stem):
        self.count += 1
        return f"/sparse/{stem}_{self.count}"

    def node(self, op, inputs, **attrs):
        out = self.fresh(op)
        self.new.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def onehot(self, name):
        """The fact input a tensor is the one-hot matrix of (`Cast(Equal(Unsqueeze(fact_X, 1),
        Unsqueeze(Range(entities), 0)))`), else None."""
        n = self.producer.get(name)
        if n is None or n.op_type != "Cast":
            return None
        e = self.producer.get(n.input[0])
        if e is None or e.op_type != "Equal":
            return None
        for i in e.input:
            u = self.producer.get(i)
            if u is not None and u.op_type == "Unsqueeze" and u.input[0] in FACTS:
                return u.input[0]
        return None

    def incidence(self, name):
        """The fact inputs whose one-hot matrices sum to this tensor, else None."""
        one = self.onehot(name)
        if one:
            return [one]
        n = self.producer.get(name)
        if n is not None and n.op_type == "Add":
            parts = [self.onehot(i) for i in n.input]
            if all(parts):
                return parts
        return None

    def transposed(self, name):
        n = self.producer.get(name)
        if n is not None and n.op_type == "Transpose":
            perm = [helper.get_attribute_value(a) for a in n.attribute if a.name == "perm"]
            if perm in ([[1, 0]], []):
                return n.input[0]
        return None

    def entities(self):
        """The entity count as an int64 scalar: the limit of the Range the one-hot matrices
        compare fact ids with (the dialog encoder has Ranges of its own)."""
        for n in self.g.node:
            if n.op_type != "Equal" or not any((u := self.producer.get(i)) is not None and u.op_type == "Unsqueeze" and u.input[0] in FACTS for i in n.input):
                continue
            for i in n.input:
                u = self.producer.get(i)
                r = self.producer.get(u.input[0]) if u is not None and u.op_type == "Unsqueeze" else None
                if r is not None and r.op_type == "Range":
                    return self.node("Cast", [r.input[1]], to=TensorProto.INT64)
        raise SystemExit("no one-hot matrix of fact ids: not a dense subgraph model export (nothing to rewrite?)")

    def axes(self, n):
        """A ReduceSum's axes (its second input, a constant), or None when not known here."""
        if len(n.input) < 2 or not n.input[1]:
            return None
        inits = {i.name: i for i in self.g.initializer}
        if n.input[1] in inits:
            return [int(x) for x in numpy_helper.to_array(inits[n.input[1]]).ravel()]
        c = self.producer.get(n.input[1])
        if c is not None and c.op_type == "Constant":
            return [int(x) for x in numpy_helper.to_array(c.attribute[0].t).ravel()]
        return None

    def scatter_add(self, facts, x):
        """sum over the fact inputs `facts` of ScatterND(zeros[entities, ...], idx, x, add)."""
        n = self.node("Unsqueeze", [self.entities(), self.const_i64([0])])
        rest = self.node("Slice", [self.node("Shape", [x]), self.const_i64([1]), self.const_i64([2**62])])
        shape = self.node("Concat", [n, rest], axis=0)
        acc = self.node("ConstantOfShape", [shape], value=helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0]))
        for f in facts:
            idx = self.node("Unsqueeze", [f, self.const_i64([1])])
            acc = self.node("ScatterND", [acc, idx, x], reduction="add")
        return acc

    def const_i64(self, values):
        out = self.fresh("const")
        self.new.append(helper.make_node("Constant", [], [out], name=out, value=helper.make_tensor(out, TensorProto.INT64, [len(values)], values)))
        return out

    def rewrite(self):
        nodes, rewritten = [], 0
        for n in self.g.node:
            self.new = []
            replacement = None
            if n.op_type == "MatMul":
                a, x = n.input
                t = self.transposed(a)
                facts = self.incidence(t) if t else None
                if facts:
                    replacement = self.scatter_add(facts, x)
                elif (facts := self.incidence(a)):
                    parts = [self.node("Gather", [x, f], axis=0) for f in facts]
                    replacement = parts[0] if len(parts) == 1 else self.node("Add", parts)
            elif n.op_type == "ReduceSum" and (facts := self.incidence(n.input[0])):
                attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
                if self.axes(n) != [0]:
                    raise SystemExit(f"{n.name}: a sum of an incidence matrix over axes {self.axes(n)}, not the degrees (axis 0)")
                ones = self.node("ConstantOfShape", [self.node("Shape", [facts[0]])], value=helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0]))
                if attrs.get("keepdims", 1) != 0:
                    raise SystemExit(f"{n.name}: a degree sum that keeps its axis is not a shape this tool knows")
                replacement = self.scatter_add(facts, ones)
            if replacement is None:
                nodes.append(n)
                continue
            rewritten += 1
            nodes.extend(self.new)
            nodes.append(helper.make_node("Identity", [replacement], [n.output[0]], name=n.name + "_sparse"))
        if rewritten == 0:
            raise SystemExit("no dense incidence product found: nothing to rewrite")
        del self.g.node[:]
        self.g.node.extend(nodes)
        prune(self.g)
        return rewritten


def prune(g):
    """Drops the nodes nothing reads (the one-hot matrices), then unused initializers."""
    needed = {o.name for o in g.output}
    keep = []
    for n in reversed(list(g.node)):
        if any(o in needed for o in n.output):
            keep.append(n)
            needed.update(i for i in n.input if i)
    keep.reverse()
    del g.node[:]
    g.node.extend(keep)
    inits = [i for i in g.initializer if i.name in needed]
    del g.initializer[:]
    g.initializer.extend(inits)


def subgraphs(targets, limit, rng, vocab=1000):
    """Model inputs: from `trellis targets` lines, or random subgraphs of growing size."""
    out = []
    if targets:
        for line in open(targets, encoding="utf-8"):
            t = json.loads(line)
            if t.get("skipped") or not t.get("fact_head"):
                continue

            def padded(rows):
                n = max([len(r) for r in rows] + [1])
                ids = np.zeros((len(rows), n), dtype=np.int64)
                mask = np.zeros((len(rows), n), dtype=np.int64)
                for i, r in enumerate(rows):
                    ids[i, : len(r)], mask[i, : len(r)] = r, 1
                return ids, mask

            eids, emask = padded(t["entity_ids"])
            rids, rmask = padded(t["relation_ids"])
            ids = np.array([t["input_ids"]], dtype=np.int64)
            out.append({"input_ids": ids, "attention_mask": np.ones_like(ids), "entity_ids": eids, "entity_mask": emask,
                        "entity_mentioned": np.array(t["entity_mentioned"], dtype=np.float32), "relation_ids": rids, "relation_mask": rmask,
                        "fact_head": np.array(t["fact_head"], dtype=np.int64), "fact_relation": np.array(t["fact_relation"], dtype=np.int64),
                        "fact_tail": np.array(t["fact_tail"], dtype=np.int64)})
            if len(out) >= limit:
                break
        return out
    for facts in (1, 10, 100, 400, 800, 1600):
        ents = max(2, facts * 4 // 5)
        ids = rng.integers(3, vocab, size=(1, 40))
        out.append({"input_ids": ids, "attention_mask": np.ones_like(ids), "entity_ids": rng.integers(3, vocab, size=(ents, 6)),
                    "entity_mask": np.ones((ents, 6), dtype=np.int64), "entity_mentioned": (rng.random(ents) < 0.05).astype(np.float32),
                    "relation_ids": rng.integers(3, vocab, size=(20, 3)), "relation_mask": np.ones((20, 3), dtype=np.int64),
                    "fact_head": rng.integers(0, ents, size=facts), "fact_relation": rng.integers(0, 20, size=facts),
                    "fact_tail": rng.integers(0, ents, size=facts)})
    return out


def compare(dense_path, sparse_path, inputs):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    a = ort.InferenceSession(str(dense_path), so, providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(str(sparse_path), so, providers=["CPUExecutionProvider"])
    worst, times = 0.0, [0.0, 0.0]
    for x in inputs:
        outs = []
        for k, s in enumerate((a, b)):
            start = time.perf_counter()
            outs.append(s.run(["fact_scores"], x)[0])
            times[k] += time.perf_counter() - start
        again = b.run(["fact_scores"], x)[0]
        if not np.array_equal(again, outs[1]):
            Path(sparse_path).unlink()
            raise SystemExit("the rewritten graph gave two answers to one input (a scatter that is not deterministic)")
        scale = max(1.0, float(np.abs(outs[0]).max()))
        worst = max(worst, float(np.abs(outs[0] - outs[1]).max()) / scale)
    return worst, times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="a subgraph model directory (its model.onnx is rewritten)")
    ap.add_argument("--targets", type=Path, help="`trellis targets` lines of this model to check on (default: random subgraphs)")
    ap.add_argument("--limit", type=int, default=200, help="subgraphs of --targets checked (default 200; without --targets, six random ones of 1 to 1,600 facts)")
    ap.add_argument("--tolerance", type=float, default=1e-4, help="largest score move allowed, relative to the largest score")
    ap.add_argument("--no-keep", action="store_true", help="do not keep the dense graph as model.dense.onnx")
    args = ap.parse_args()
    src = args.model / "model.onnx"
    for need in (src, args.model / "config.json"):
        if not need.is_file():
            raise SystemExit(f"{need}: no such file (--model must be a subgraph model directory)")
    if args.targets is not None and not args.targets.is_file():
        raise SystemExit(f"{args.targets}: no such file (--targets: `trellis targets` lines of this model)")
    m = onnx.load(str(src))
    n = Rewriter(m).rewrite()
    onnx.checker.check_model(m)
    out = args.model / "model.sparse.onnx"
    onnx.save(m, str(out))
    vocab = json.loads((args.model / "config.json").read_text())["vocab_size"]
    checks = subgraphs(args.targets, args.limit, np.random.default_rng(20261129), vocab)
    worst, (dense_s, sparse_s) = compare(src, out, checks)
    print(f"{n} dense products rewritten; largest score move {worst:.2e} of the largest score; "
          f"dense {dense_s:.3f} s, sparse {sparse_s:.3f} s over the checked subgraphs", file=sys.stderr)
    if worst > args.tolerance:
        out.unlink()
        raise SystemExit(f"refused: scores moved by {worst:.2e} > {args.tolerance:.0e}; {src} is unchanged")
    if not args.no_keep:
        shutil.copyfile(src, args.model / "model.dense.onnx")
    out.replace(src)
    print(f"wrote {src}", file=sys.stderr)


if __name__ == "__main__":
    main()
