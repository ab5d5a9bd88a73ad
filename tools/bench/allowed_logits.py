"""What a decoder step would cost if it computed only the allowed tokens' logits (issue 37:
the t5-small-shaped speed-up over the Python reference). With `model_norm: allowed` the
beam search reads the logits of the tokens the constraint allows and nothing else, yet the
exported decoder multiplies every row by the whole vocabulary projection; onnxruntime runs
every node whatever outputs are fetched, so skipping it needs a graph of its own.

This builds that graph from an optimum split export's `decoder_with_past_model.onnx` (the
final MatMul by [d_model, vocab] replaced by a Gather of the rows of `allowed_ids`, an input
[rows, K], and a batched product), checks that its logits are the full graph's at those ids,
and times one cached step of both on random inputs, alternating:

    $PY -c "import sys; sys.path.insert(0, 'tools/train'); import t5; \\
        m = t5.build('t5-small', 32128, 1).eval(); m.save_pretrained('/tmp/t5s-hf'); \\
        t5.export('/tmp/t5s-hf', '/tmp/t5s-onnx', False)"          # train environment
    $PY tools/bench/allowed_logits.py /tmp/t5s-onnx [--rows 40] [--k 20 200]   # onnx environment

It measures one step on random inputs; the graph Trellis reads is tools/train/listed_logits.py's
(the same product in chunks of 16 ids, so a row's logits do not depend on the step's width).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper


def allowed_only(src, dst):
    """The graph at `src` with its logits computed for `allowed_ids` only; written to `dst`."""
    m = onnx.load(src)
    g = m.graph
    producer = {o: n for n in g.node for o in n.output}
    last = producer.get("logits")
    inits = {i.name: i for i in g.initializer}
    if last is None or last.op_type != "MatMul" or sum(i in inits for i in last.input) != 1:
        raise SystemExit(f"allowed_logits: {src}: the logits are not one MatMul by a weight")
    w_name = [i for i in last.input if i in inits][0]
    hidden = [i for i in last.input if i not in inits][0]
    w = numpy_helper.to_array(inits[w_name])
    g.initializer.append(numpy_helper.from_array(np.ascontiguousarray(w.T), "lm_rows"))
    g.input.append(helper.make_tensor_value_info("allowed_ids", onnx.TensorProto.INT64, ["rows", "k"]))
    nodes = [n for n in g.node if n is not last] + [
        helper.make_node("Gather", ["lm_rows", "allowed_ids"], ["lm_selected"], axis=0),
        helper.make_node("Transpose", ["lm_selected"], ["lm_selected_t"], perm=[0, 2, 1]),
        helper.make_node("MatMul", [hidden, "lm_selected_t"], ["logits"]),
    ]
    del g.node[:]
    g.node.extend(nodes)
    for o in g.output:
        if o.name == "logits":
            o.CopyFrom(helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["rows", 1, "k"]))
    onnx.save(m, dst, save_as_external_data=True, location=Path(dst).name + ".data")
    return w.shape


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("export", type=Path, help="an optimum split export (decoder_with_past_model.onnx)")
    ap.add_argument("--rows", type=int, default=40, help="beam rows of a step (batch 8 x 5 beams)")
    ap.add_argument("--source", type=int, default=100, help="encoder positions")
    ap.add_argument("--past", type=int, default=20, help="decoder positions already cached")
    ap.add_argument("--k", type=int, nargs="+", default=[20, 200], help="allowed tokens per row")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    src = args.export / "decoder_with_past_model.onnx"
    if not src.is_file():
        raise SystemExit(f"allowed_logits: {src}: no such file")
    dst = args.export / "decoder_allowed_logits.onnx"
    d_model, vocab = allowed_only(src, dst)
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    full = ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
    allowed = ort.InferenceSession(str(dst), so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {}
    for i in full.get_inputs():
        heads = i.shape[1] if len(i.shape) == 4 and isinstance(i.shape[1], int) else 8
        d_kv = i.shape[3] if len(i.shape) == 4 and isinstance(i.shape[3], int) else d_model // heads
        if i.name == "input_ids":
            feed[i.name] = rng.integers(2, vocab, (args.rows, 1)).astype(np.int64)
        elif i.name == "encoder_attention_mask":
            feed[i.name] = np.ones((args.rows, args.source), np.int64)
        elif i.name == "encoder_hidden_states":
            feed[i.name] = rng.standard_normal((args.rows, args.source, d_model)).astype(np.float32)
        elif i.name.endswith((".encoder.key", ".encoder.value")):
            feed[i.name] = rng.standard_normal((args.rows, heads, args.source, d_kv)).astype(np.float32)
        elif i.name.endswith((".decoder.key", ".decoder.value")):
            feed[i.name] = rng.standard_normal((args.rows, heads, args.past, d_kv)).astype(np.float32)
        else:
            raise SystemExit(f"allowed_logits: {src}: an input this probe does not fill: {i.name}")

    def ms(session, f):
        session.run(["logits"], f)
        t = time.perf_counter()
        for _ in range(args.reps):
            session.run(["logits"], f)
        return (time.perf_counter() - t) / args.reps * 1000

    print(f"d_model {d_model}, vocabulary {vocab}, {args.rows} rows, {args.source} encoder and {args.past} cached positions, {args.threads} threads")
    print("| allowed tokens per row | round | full vocabulary ms/step | allowed only ms/step | saved |")
    print("|---|---|---|---|---|")
    for k in args.k:
        ids = rng.integers(2, vocab, (args.rows, k)).astype(np.int64)
        fa = dict(feed, allowed_ids=ids)
        whole = full.run(["logits"], feed)[0][:, 0, :]
        part = allowed.run(["logits"], fa)[0][:, 0, :]
        worst = float(np.max(np.abs(np.take_along_axis(whole, ids, 1) - part)))
        if worst > 1e-4 * max(1.0, float(np.max(np.abs(whole)))):
            raise SystemExit(f"allowed_logits: the allowed-only logits differ from the full ones by {worst}")
        for r in (1, 2):
            a, b = ms(full, feed), ms(allowed, fa)
            print(f"| {k} | {r} | {a:.2f} | {b:.2f} | {100 * (1 - b / a):.0f}% |")
        print(f"(K={k}: largest difference from the full graph's logits {worst:.1e})", file=sys.stderr)


if __name__ == "__main__":
    main()
