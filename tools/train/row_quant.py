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
and the integer product is exact, so a row's output is the same in any batch.

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
    "rq_128": np.array(128.0, dtype=np.float32),
    "rq_0": np.array(0.0, dtype=np.float32),
    "rq_255": np.array(255.0, dtype=np.float32),
    "rq_zero_point": np.array(128, dtype=np.uint8),
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
        n("Div", [x, p("scale")], "scaled"),
        n("Round", [p("scaled")], "rounded"),
        n("Add", [p("rounded"), "rq_128"], "shifted"),
        n("Clip", [p("shifted"), "rq_0", "rq_255"], "clipped"),
        n("Cast", [p("clipped")], "quantized", to=onnx.TensorProto.UINT8),
    ]
    return nodes, p("quantized"), p("scale")


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
        nodes = []
        for n in g.node:
            nodes.extend(before.get(id(n), []))
            if id(n) in drop:
                continue
            nodes.extend(replace.get(id(n), [n]))
        del g.node[:]
        g.node.extend(nodes)
    top.initializer.extend(numpy_helper.from_array(v, name=k) for k, v in CONSTANTS.items())
    drop_dead(top)
    left = sum(1 for g in all_graphs(top) for n in g.node if n.op_type == "DynamicQuantizeLinear")
    if left:
        raise SystemExit(f"row_quant: {left} per-tensor quantizations left")
    return converted


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    model = onnx.load(sys.argv[1])
    converted = convert(model)
    onnx.checker.check_model(model)
    onnx.save(model, sys.argv[2])
    print(f"row_quant: {sys.argv[2]}: {converted} matrix products with per-row activation scales", file=sys.stderr)


if __name__ == "__main__":
    main()
