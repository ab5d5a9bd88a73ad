"""Turns a dynamically quantized ONNX model (onnxruntime's quantize_dynamic) into one whose
activations are quantized per row: int8 arithmetic as before, and a row's result no longer
depends on the other rows of its batch.

Why: `DynamicQuantizeLinear` computes one scale and zero point per tensor, over the whole
batch, so a request's scores changed with its neighbours. Each
`DynamicQuantizeLinear(x) -> MatMulInteger -> Cast -> Mul(scales)` chain becomes

    s   = max(ReduceMax(|x|, last axis), tiny) / 127          one scale per row
    x_q = uint8(clip(round(x / s) + 128, 0, 255))               symmetric, zero point 128
    y   = float(MatMulInteger(x_q, w_int8, 128, w_zero)) * (s * w_scale)

The zero point is the scalar 128 for every row, which onnxruntime's MatMulInteger takes (it
takes no per-row zero points); the scale is per row and applied after the integer product,
so the uint8 x int8 kernels run as before. Rows are quantized from their own values only,
and the integer product is exact, so a row's output is the same in any batch. x_q is one
QuantizeLinear per axis on x flattened to [rows, width] (quantize_rows); the first version
wrote it as Div, Round, Add, Clip and Cast, five passes over x for the same bytes, and a
model converted so is upgraded in place of a conversion:

    python tools/train/row_quant.py IN.onnx OUT.onnx

Weights are not touched (int8, per tensor, or per column when quantize_dynamic was given
per_channel). Embedding lookups (Gather on int8 rows, then DequantizeLinear) are per row
already and stay.

`convert(model, split_scales=True)` (what a BERT-style export needs) rescales in two steps,
`Mul(Mul(float(y_int), w_scale), s)`, instead of one `Mul` by `s * w_scale`. onnxruntime's
graph optimizer (level "extended" and above; the default is "all") fuses the one-Mul chain of
all-MiniLM-L6-v2 (MatMulInteger, Cast, Mul, the bias Add) into MatMulIntegerToFloat with the
per-row scale as its activation scale, which that operator takes as a scalar: wrong values
(vectors at cosine 0.39 from float's with the optimizer on, 0.995 with it off). The split
chain is left unfused (checked in the optimized graph) and gives 0.995 at every level. The
T5 exports keep the one Mul (their export check passes at the default level).
"""

import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper


def subgraphs(node):
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        for g in a.graphs:
            yield g


def all_graphs(graph):
    yield graph
    for n in graph.node:
        for g in subgraphs(n):
            yield from all_graphs(g)


def names_read(graph):
    """Every name a graph's nodes (and their subgraphs') read, and its outputs."""
    used = {o.name for o in graph.output}
    for n in graph.node:
        used.update(n.input)
        for g in subgraphs(n):
            used |= names_read(g)
    return used


def drop_dead(graph):
    """Removes nodes none of whose outputs is read (iteratively) and unread initializers."""
    for g in all_graphs(graph):
        while True:
            used = names_read(g)
            keep = [n for n in g.node if any(o in used for o in n.output) or not n.output]
            if len(keep) == len(g.node):
                break
            del g.node[:]
            g.node.extend(keep)
    used = names_read(graph)
    for g in all_graphs(graph):
        keep = [i for i in g.initializer if i.name in used]
        del g.initializer[:]
        g.initializer.extend(keep)


CONSTANTS = {
    "rq_axis_last": np.array([-1], dtype=np.int64),
    "rq_tiny": np.array(1e-30, dtype=np.float32),
    "rq_127": np.array(127.0, dtype=np.float32),
    "rq_zero_point": np.array(128, dtype=np.uint8),
    "rq_rows": np.array([-1], dtype=np.int64),
}


def row_quantize(x, prefix):
    """Nodes quantizing `x` per row; returns (nodes, quantized name, per-row scale name)."""
    n = lambda op, ins, out, **kw: helper.make_node(op, ins, [f"{prefix}/{out}"], name=f"{prefix}/{out}_node", **kw)  # noqa: E731
    p = lambda out: f"{prefix}/{out}"  # noqa: E731
    nodes = [
        n("Abs", [x], "abs"),
        n("ReduceMax", [p("abs"), "rq_axis_last"], "absmax", keepdims=1),
        n("Max", [p("absmax"), "rq_tiny"], "absmax_pos"),
        n("Div", [p("absmax_pos"), "rq_127"], "scale"),
    ] + quantize_rows(x, p("scale"), p("quantized"), prefix)
    return nodes, p("quantized"), p("scale")


def quantize_rows(x, scale, out, prefix):
    """`out` = uint8(clip(round(x / scale) + 128, 0, 255)) for `scale` of one value per row
    (x's last axis is the row), as one QuantizeLinear: x flattened to [rows, width] and
    quantized per axis 0, with a zero point of 128 for every row. The same bytes as
    Div, Round, Add, Clip and Cast (QuantizeLinear divides, rounds half to even and
    saturates; |x / scale| <= 127 here anyway) in one pass over x instead of five."""
    n = lambda op, ins, o, **kw: helper.make_node(op, ins, [f"{prefix}/{o}"], name=f"{prefix}/{o}_node", **kw)  # noqa: E731
    p = lambda o: f"{prefix}/{o}"  # noqa: E731
    return [
        n("Flatten", [x], "rows", axis=-1),
        n("Reshape", [scale, "rq_rows"], "row_scale"),
        n("Shape", [p("row_scale")], "row_count"),
        n("Expand", ["rq_zero_point", p("row_count")], "row_zero_point"),
        n("QuantizeLinear", [p("rows"), p("row_scale"), p("row_zero_point")], "rows_quantized", axis=0),
        n("Shape", [x], "shape"),
        # allowzero: a 0 in x's shape is a 0 (an empty sequence), not "copy the input's dimension".
        helper.make_node("Reshape", [p("rows_quantized"), p("shape")], [out], name=f"{prefix}/reshape_node", allowzero=1),
    ]


def splice(graph, before, replace, drop):
    """Rewrites `graph`'s node list in order: `before[id(n)]` ahead of node n, n replaced by
    `replace[id(n)]` (itself when absent), nodes whose id is in `drop` left out."""
    nodes = []
    for n in graph.node:
        nodes.extend(before.get(id(n), []))
        if id(n) not in drop:
            nodes.extend(replace.get(id(n), [n]))
    del graph.node[:]
    graph.node.extend(nodes)


def finish(top):
    """The shared constants added once (an upgraded model may hold some), unread names dropped."""
    have = {i.name for i in top.initializer}
    top.initializer.extend(numpy_helper.from_array(v, name=k) for k, v in CONSTANTS.items() if k not in have)
    drop_dead(top)


def upgrade(model):
    """A model converted by the first version of this script (Div, Round, Add, Clip, Cast per
    quantized activation) with each such chain as one QuantizeLinear (quantize_rows): the
    same bytes, about 10% less decoder time for t5-small-sized models. Returns the count."""
    top = model.graph
    upgraded = 0
    for gi, g in enumerate(all_graphs(top)):
        producer = {o: n for n in g.node for o in n.output}
        replace, drop = {}, set()
        for cast in g.node:
            if cast.op_type != "Cast" or cast.input[0] not in producer or producer[cast.input[0]].op_type != "Clip":
                continue
            clip = producer[cast.input[0]]
            first = lambda node: producer.get(node.input[0]) if node is not None and node.input else None  # noqa: E731
            add = first(clip)
            rnd = first(add)
            div = first(rnd)
            chain = [x.op_type if x is not None else None for x in (add, rnd, div)]
            if chain != ["Add", "Round", "Div"] or list(clip.input[1:]) != ["rq_0", "rq_255"] or add.input[1] != "rq_128":
                raise SystemExit(f"row_quant: {cast.name}: not the per-row chain of Div, Round, Add, Clip, Cast")
            x, scale = div.input
            replace[id(cast)] = quantize_rows(x, scale, cast.output[0], f"rq{gi}/u{upgraded}")
            drop.update({id(clip), id(add), id(rnd), id(div)})
            upgraded += 1
        splice(g, {}, replace, drop)
    finish(top)
    return upgraded


def convert(model, split_scales=False):
    top = model.graph
    converted = 0
    for gi, g in enumerate(all_graphs(top)):
        tensors = {i.name: i for i in top.initializer}
        tensors.update({i.name: i for i in g.initializer})
        producer = {o: n for n in g.node for o in n.output}
        consumers = {}
        for n in g.node:
            for i in n.input:
                consumers.setdefault(i, []).append(n)
        quantized = {}  # DynamicQuantizeLinear input -> (quantized name, scale name)
        before = {}  # id(node) -> nodes inserted before it
        replace = {}  # id(node) -> nodes replacing it
        drop = set()
        for m in g.node:
            if m.op_type != "MatMulInteger":
                continue
            quantize = producer.get(m.input[0])
            if quantize is None or quantize.op_type != "DynamicQuantizeLinear":
                raise SystemExit(f"row_quant: {m.name}: activation not from DynamicQuantizeLinear")
            (cast,) = consumers[m.output[0]]
            (mul,) = consumers[cast.output[0]]
            if cast.op_type != "Cast" or mul.op_type != "Mul":
                raise SystemExit(f"row_quant: {m.name}: unexpected chain {cast.op_type} -> {mul.op_type}")
            w, zero = m.input[1], m.input[3]
            scales = producer.get(mul.input[1]) or producer.get(mul.input[0])
            w_scale = [i for i in (scales.input if scales else []) if i in tensors]
            if scales is None or scales.op_type != "Mul" or len(w_scale) != 1 or zero not in tensors or w not in tensors:
                raise SystemExit(f"row_quant: {w}: weight, scale or zero point not found")
            if numpy_helper.to_array(tensors[w]).dtype != np.int8:
                raise SystemExit(f"row_quant: {w}: weights must be int8")
            x = quantize.input[0]
            if x not in quantized:
                nodes, q, s = row_quantize(x, f"rq{gi}/{len(quantized)}")
                quantized[x] = (q, s)
                before.setdefault(id(quantize), []).extend(nodes)
            q, s = quantized[x]
            out = mul.output[0]
            replace[id(m)] = [
                helper.make_node("MatMulInteger", [q, w, "rq_zero_point", zero], [out + "/int"], name=m.name),
                helper.make_node("Cast", [out + "/int"], [out + "/float"], name=m.name + "/cast", to=onnx.TensorProto.FLOAT),
            ] + ([
                helper.make_node("Mul", [out + "/float", w_scale[0]], [out + "/wscaled"], name=m.name + "/wscale"),
                helper.make_node("Mul", [out + "/wscaled", s], [out], name=m.name + "/rescale"),
            ] if split_scales else [
                helper.make_node("Mul", [s, w_scale[0]], [out + "/scale"], name=m.name + "/scale"),
                helper.make_node("Mul", [out + "/float", out + "/scale"], [out], name=m.name + "/rescale"),
            ])
            drop.add(id(cast))
            drop.add(id(mul))
            converted += 1
        splice(g, before, replace, drop)
    finish(top)
    left = sum(1 for g in all_graphs(top) for n in g.node if n.op_type == "DynamicQuantizeLinear")
    if left:
        raise SystemExit(f"row_quant: {left} per-tensor quantizations left")
    return converted


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    model = onnx.load(sys.argv[1])
    ops = {n.op_type for g in all_graphs(model.graph) for n in g.node}
    if "DynamicQuantizeLinear" in ops:
        done = f"{convert(model)} matrix products with per-row activation scales"
    elif "Round" in ops:
        done = f"{upgrade(model)} per-row quantizations as one QuantizeLinear each"
    else:
        raise SystemExit(f"row_quant: {sys.argv[1]}: neither per-tensor (DynamicQuantizeLinear) nor first-version per-row quantization")
    onnx.checker.check_model(model)
    onnx.save(model, sys.argv[2])
    print(f"row_quant: {sys.argv[2]}: {done}", file=sys.stderr)


if __name__ == "__main__":
    main()
