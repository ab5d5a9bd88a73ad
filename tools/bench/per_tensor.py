"""A per-row T5 model directory (tools/train/row_quant.py) back in onnxruntime's per-tensor
dynamic form, for measuring only: what the shipped weights would cost quantized as
`quantize_dynamic` leaves them (one activation scale and zero point over the whole batch,
`DynamicQuantizeLinear`), which answers differently with the batch and is not shipped.
tools/bench/quantize.sh compares it with the per-row and the constant-scale forms of the
same weights (MODEL_DIRS).

    python tools/bench/per_tensor.py MODEL_DIR OUT_DIR

Each per-row group (Abs, ReduceMax, Max, Div, QuantizeLinear per row) becomes one
DynamicQuantizeLinear, and each integer product that reads it MatMulInteger with that zero
point, Cast, and Mul by the tensor's scale times the weight's: quantize_dynamic's own chain.
"""

import shutil
import sys
from pathlib import Path

import onnx
from onnx import helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from row_quant import all_graphs, drop_dead  # noqa: E402
from static_quant import groups, rescaling  # noqa: E402


def per_tensor(model):
    done = 0
    for gi, graph in enumerate(all_graphs(model.graph)):
        gs = groups(graph)
        if not gs:
            continue
        producer = {o: n for n in graph.node for o in n.output}
        consumers = {}
        for n in graph.node:
            for i in n.input:
                consumers.setdefault(i, []).append(n)
        replace = {}
        for k, g in enumerate(gs):
            p = f"pt{gi}/{k}"
            replace[id(producer[g["quantized"]])] = [
                helper.make_node("DynamicQuantizeLinear", [g["x"]], [g["quantized"], p + "/scale", p + "/zero_point"], name=p + "/dql")
            ]
            for m in consumers[g["quantized"]]:
                if m.op_type != "MatMulInteger":
                    continue
                chain = rescaling(m, consumers, producer, g["scale"])
                if chain is None:
                    raise SystemExit(f"per_tensor: {m.name}: not MatMulInteger -> Cast -> Mul(y, s * w_scale)")
                _, mul, w_scale = chain
                other = [i for i in mul.input if i in producer and producer[i].op_type == "Mul" and g["scale"] in producer[i].input][0]
                prod = producer[other]
                a, w, _, w_zero = m.input
                replace[id(m)] = [helper.make_node("MatMulInteger", [a, w, p + "/zero_point", w_zero], [m.output[0]], name=m.name)]
                replace[id(prod)] = [helper.make_node("Mul", [p + "/scale", w_scale], [other], name=prod.name)]
            done += 1
        nodes = []
        for n in graph.node:
            nodes.extend(replace.get(id(n), [n]))
        del graph.node[:]
        graph.node.extend(nodes)
    drop_dead(model.graph)
    if not done:
        raise SystemExit("per_tensor: no per-row activation quantization found (not a row_quant.py model)")
    return done


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    if out.exists():
        raise SystemExit(f"per_tensor: {out}: exists")
    for f in ("encoder_model.onnx", "decoder_model_merged.onnx"):
        if not (src / f).is_file():
            raise SystemExit(f"per_tensor: {src / f}: no such file")
    converted = []
    for f in ("encoder_model.onnx", "decoder_model_merged.onnx"):
        m = onnx.load(src / f)
        n = per_tensor(m)
        onnx.checker.check_model(m)
        converted.append((f, m, n))
    shutil.copytree(src, out)
    for f, m, n in converted:
        onnx.save(m, out / f)
        print(f"per_tensor: {out / f}: {n} activations with one dynamic scale per tensor", file=sys.stderr)


if __name__ == "__main__":
    main()
