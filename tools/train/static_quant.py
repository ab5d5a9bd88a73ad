"""Turns a model whose activations are quantized per row (tools/train/row_quant.py) into one
whose activation scales are constants, calibrated once on training data: static int8.

Why: per-row scales made a request's scores independent of its batch (issue 37), at the
price of a reduction over every activation before each integer product (Abs, ReduceMax,
Max, Div, then QuantizeLinear per axis). A constant scale is batch-independent too, and
costs one QuantizeLinear per tensor; onnxruntime can then fuse the chain into its integer
kernels. Each per-row group

    s = max(ReduceMax(|x|, last axis), tiny) / 127;   x_q = QuantizeLinear(x, s, 128)

becomes

    x_q = QuantizeLinear(x, S, 128)    S = CALIB_MAX / 127, a constant

where CALIB_MAX is the largest |x| the group saw over the calibration turns (each run alone,
unpadded) times MARGIN; values beyond it saturate. The integer products and weight scales are
untouched, so the only change is each activation's scale.

Calibration reads `trellis targets` output (JSONL: input_ids, target_ids) made by the model's
own input code from *training* dialogs:

    trellis targets --store S --model M --input dialogs_train.csv --output calib.jsonl
    python tools/train/static_quant.py M OUT calib.jsonl [--turns 2000] [--margin 1.0]

M: a retriever or generator directory with encoder_model.onnx and decoder_model_merged.onnx
(their other files are copied). Decoder activations are calibrated on the no-cache branch with
the gold sequence teacher-forced (the same activations, position by position, as the cached
steps compute one at a time); the cached branch takes the same constants, matched by the
weights the group feeds.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from row_quant import all_graphs, drop_dead  # noqa: E402


def groups(graph):
    """The per-row quantizations of one graph: dicts of x, the quantized name, the per-row
    scale's name, the absmax name, and key (the weights the quantized tensor feeds)."""
    producer = {o: n for n in graph.node for o in n.output}
    consumers = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    out = []
    for q in graph.node:
        if q.op_type != "QuantizeLinear":
            continue
        flat = producer.get(q.input[0])
        reshape_scale = producer.get(q.input[1])
        if flat is None or flat.op_type != "Flatten" or reshape_scale is None or reshape_scale.op_type != "Reshape":
            continue
        back = consumers.get(q.output[0], [])
        if len(back) != 1 or back[0].op_type != "Reshape":
            raise SystemExit(f"static_quant: {q.name}: not row_quant's per-row chain (one Reshape after the QuantizeLinear)")
        back = back[0]
        scale = reshape_scale.input[0]
        div = producer.get(scale)
        mx = producer.get(div.input[0]) if div is not None else None
        rmax = producer.get(mx.input[0]) if mx is not None else None
        if rmax is None or (div.op_type, mx.op_type, rmax.op_type) != ("Div", "Max", "ReduceMax"):
            raise SystemExit(f"static_quant: {q.name}: the scale is not max(ReduceMax(|x|), tiny) / 127")
        quantized = back.output[0]
        weights = sorted(m.input[1] for m in consumers.get(quantized, []) if m.op_type == "MatMulInteger")
        if not weights:
            raise SystemExit(f"static_quant: {quantized}: feeds no integer product")
        out.append({"x": flat.input[0], "quantized": quantized, "scale": scale, "absmax": rmax.output[0], "key": "|".join(weights)})
    return out


def rescaling(m, consumers, producer, scale):
    """row_quant's chain after an integer product `m`: (Cast, Mul, the weight scale's name)
    when `m` feeds one Cast that feeds one Mul by Mul(scale, w_scale); None otherwise."""
    casts = consumers.get(m.output[0], [])
    if len(casts) != 1 or casts[0].op_type != "Cast":
        return None
    muls = consumers.get(casts[0].output[0], [])
    if len(muls) != 1 or muls[0].op_type != "Mul":
        return None
    other = [i for i in muls[0].input if i != casts[0].output[0]]
    prod = producer.get(other[0]) if len(other) == 1 else None
    if prod is None or prod.op_type != "Mul" or scale not in prod.input:
        return None
    w_scale = [i for i in prod.input if i != scale]
    return (casts[0], muls[0], w_scale[0]) if len(w_scale) == 1 else None


def with_probes(graph, gs):
    """Adds one scalar output per group: the largest |x| of the run."""
    for i, g in enumerate(gs):
        name = f"calib/{i}"
        graph.node.append(helper.make_node("ReduceMax", [g["absmax"]], [name], keepdims=0, name=name + "_node"))
        graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, []))


def no_cache_branch(model):
    """The merged decoder's no-cache branch as a model of its own (inputs: the top graph's
    that it reads)."""
    ifs = [n for n in model.graph.node if n.op_type == "If"]
    branches = [a.g for n in ifs for a in n.attribute if a.name == "else_branch"]
    if len(ifs) != 1 or len(branches) != 1:
        raise SystemExit("static_quant: decoder_model_merged.onnx: not optimum's merged decoder (one If on use_cache_branch)")
    branch = branches[0]
    read = {i for n in branch.node for i in n.input}
    g = helper.make_graph(
        list(branch.node),
        "calibration",
        [i for i in model.graph.input if i.name in read],
        [o for o in branch.output if o.name == "logits"],
        list(model.graph.initializer) + list(branch.initializer),
    )
    m = helper.make_model(g, opset_imports=model.opset_import)
    m.ir_version = model.ir_version
    return m, branch


def session(model):
    o = ort.SessionOptions()
    o.intra_op_num_threads = 2
    return ort.InferenceSession(model.SerializeToString(), o, providers=["CPUExecutionProvider"])


def calibrate(model_dir, samples):
    enc = onnx.load(model_dir / "encoder_model.onnx")
    enc_groups = groups(enc.graph)
    probe = onnx.ModelProto()
    probe.CopyFrom(enc)
    with_probes(probe.graph, enc_groups)
    dec = onnx.load(model_dir / "decoder_model_merged.onnx")
    dec_probe, branch = no_cache_branch(dec)
    dec_groups = groups(branch)
    with_probes(dec_probe.graph, dec_groups)
    es, ds = session(probe), session(dec_probe)
    enc_max = np.zeros(len(enc_groups))
    dec_max = np.zeros(len(dec_groups))
    start = json.loads((model_dir / "config.json").read_text()).get("decoder_start_token_id", 0)
    dec_inputs = {i.name for i in dec_probe.graph.input}
    for s in samples:
        ids = np.array([s["input_ids"]], dtype=np.int64)
        mask = np.ones_like(ids)
        out = es.run(None, {"input_ids": ids, "attention_mask": mask})
        hidden, probes = out[0], out[1:]
        enc_max = np.maximum(enc_max, probes)
        dec_ids = np.array([[start] + s["target_ids"][:-1]], dtype=np.int64)
        feed = {"input_ids": dec_ids, "encoder_hidden_states": hidden, "encoder_attention_mask": mask}
        out = ds.run(None, {k: v for k, v in feed.items() if k in dec_inputs})
        dec_max = np.maximum(dec_max, out[1:])
    return keyed(enc_groups, enc_max), keyed(dec_groups, dec_max)


def keyed(gs, maxima):
    """Maxima by the weights their activation feeds (two groups feeding the same weights
    keep the larger)."""
    out = {}
    for g, v in zip(gs, maxima):
        out[g["key"]] = max(out.get(g["key"], 0.0), float(v))
    return out


def apply(model, maxima, margin):
    """Each per-row group of every graph with a constant scale; returns the count."""
    done = 0
    for gi, graph in enumerate(all_graphs(model.graph)):
        gs = groups(graph)
        if not gs:
            continue
        replace, zero_points = {}, {}
        producer = {o: n for n in graph.node for o in n.output}
        for k, g in enumerate(gs):
            if g["key"] not in maxima:
                raise SystemExit(f"static_quant: no calibration for the activation feeding {g['key']}")
            scale = np.float32(max(maxima[g["key"]] * margin, 1e-30) / 127.0)
            graph.initializer.append(numpy_helper.from_array(np.array(scale, dtype=np.float32), name=g["scale"]))
            zp = f"sq{gi}/{k}/zero_point"
            graph.initializer.append(numpy_helper.from_array(np.array(128, dtype=np.uint8), name=zp))
            # The per-row scale's producer goes (its name is now the constant).
            replace[id(producer[g["scale"]])] = []
            q = producer[g["quantized"]]
            replace[id(q)] = [helper.make_node("QuantizeLinear", [g["x"], g["scale"], zp], [g["quantized"]], name=f"sq{gi}/{k}/quantize")]
            zero_points[g["quantized"]] = zp
            done += 1
        # Each integer product of a quantized activation, its Cast and its rescaling Mul by
        # s * w_scale, as one MatMulIntegerToFloat (onnxruntime's fused kernel; it does not
        # fuse the chain itself once the scale product is a folded constant).
        consumers = {}
        for n in graph.node:
            for i in n.input:
                consumers.setdefault(i, []).append(n)
        scales = {g["quantized"]: g["scale"] for g in gs}
        for m in graph.node:
            if m.op_type != "MatMulInteger" or m.input[0] not in scales:
                continue
            chain = rescaling(m, consumers, producer, scales[m.input[0]])
            if chain is None:
                raise SystemExit(f"static_quant: {m.name}: not MatMulInteger -> Cast -> Mul(y, s * w_scale)")
            cast, mul, w_scale = chain
            a, w, _, w_zero = m.input
            zp = zero_points[a]
            replace[id(m)] = [
                helper.make_node(
                    "MatMulIntegerToFloat", [a, w, scales[a], w_scale, zp, w_zero], [mul.output[0]], name=m.name + "/fused", domain="com.microsoft"
                )
            ]
            replace[id(cast)] = []
            replace[id(mul)] = []
        nodes = []
        for n in graph.node:
            nodes.extend(replace.get(id(n), [n]))
        del graph.node[:]
        graph.node.extend(nodes)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    drop_dead(model.graph)
    if not done:
        raise SystemExit("static_quant: no per-row activation quantization found (not a row_quant.py model, or already converted)")
    left = sum(1 for g in all_graphs(model.graph) for n in g.node if n.op_type == "ReduceMax")
    if left:
        raise SystemExit(f"static_quant: {left} per-row reductions left")
    return done


def read_samples(path, turns, vocab=None):
    """The first `turns` lines of a `trellis targets` file with an input and a target; every
    id an integer below `vocab` (config.json's vocab_size) when given."""
    if turns < 1:
        raise SystemExit(f"static_quant: {turns} calibration turns: at least 1")
    samples = []
    with open(path, encoding="utf-8", errors="strict") as f:
        try:
            for n, line in enumerate(f, 1):
                try:
                    s = json.loads(line)
                except json.JSONDecodeError as e:
                    raise SystemExit(f"static_quant: {path}:{n}: not JSON ({e})")
                if not isinstance(s, dict):
                    raise SystemExit(f"static_quant: {path}:{n}: not a JSON object")
                if not (s.get("target_ids") and s.get("input_ids")):
                    continue
                for field in ("input_ids", "target_ids"):
                    ids = s[field]
                    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
                        raise SystemExit(f"static_quant: {path}:{n}: {field} is not a list of token ids")
                    if vocab is not None and max(ids) >= vocab:
                        raise SystemExit(
                            f"static_quant: {path}:{n}: {field} holds id {max(ids)}, beyond the model's {vocab} tokens (targets of another model?)"
                        )
                samples.append(s)
                if len(samples) == turns:
                    break
        except UnicodeDecodeError as e:
            raise SystemExit(f"static_quant: {path}: not UTF-8 ({e})")
    if not samples:
        raise SystemExit(f"static_quant: {path}: no line with input_ids and target_ids")
    return samples


def make_static(model_dir, samples, margin=1.0):
    """Calibrates `model_dir`'s per-row model on `samples` and rewrites its two ONNX files in
    place with constant scales; the maxima go to static_quant.json beside them."""
    enc, dec = calibrate(model_dir, samples)
    done, converted = [], []
    for name, maxima in (("encoder_model.onnx", enc), ("decoder_model_merged.onnx", dec)):
        m = onnx.load(model_dir / name)
        n = apply(m, maxima, margin)
        # The checker does not know onnxruntime's com.microsoft operators: a session is the check.
        session(m)
        converted.append((name, m))
        done.append(f"{name}: {n}")
    # Both converted before either is written.
    for name, m in converted:
        onnx.save(m, model_dir / name)
    (model_dir / "static_quant.json").write_text(
        json.dumps({"turns": len(samples), "margin": margin, "encoder": enc, "decoder": dec}, indent=1) + "\n"
    )
    return ", ".join(done)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("calibration", type=Path, help="`trellis targets` JSONL of training dialogs")
    ap.add_argument("--turns", type=int, default=2000, help="calibration turns with a target, at most")
    ap.add_argument("--margin", type=float, default=1.0, help="the calibrated maximum times this")
    args = ap.parse_args()
    for f in ("encoder_model.onnx", "decoder_model_merged.onnx", "config.json"):
        if not (args.model / f).is_file():
            raise SystemExit(f"static_quant: {args.model / f}: no such file")
    if not args.calibration.is_file():
        raise SystemExit(f"static_quant: {args.calibration}: no such file")
    if not args.margin > 0:
        raise SystemExit("static_quant: --margin must be above 0")
    if args.out.exists():
        raise SystemExit(f"static_quant: {args.out}: exists")
    vocab = json.loads((args.model / "config.json").read_text()).get("vocab_size")
    samples = read_samples(args.calibration, args.turns, vocab)
    # A listed-logits step is cut from the decoder this rewrites: it is written again for
    # the new one (Trellis would refuse the old one beside it).
    shutil.copytree(args.model, args.out, ignore=shutil.ignore_patterns("decoder_listed_model.onnx"))
    try:
        done = make_static(args.out, samples, args.margin)
        if (args.model / "decoder_listed_model.onnx").is_file():
            from listed_logits import write as write_listed

            done += "; " + write_listed(args.out)
    except BaseException:
        shutil.rmtree(args.out, ignore_errors=True)
        raise
    print(f"static_quant: {args.out}: activations with constant scales ({done}) from {len(samples)} turns", file=sys.stderr)


if __name__ == "__main__":
    main()
