"""Writes a model's `decoder_listed_model.onnx`: its cached decoder step with the logits
computed for listed tokens only (schema/model.md, "Listed logits").

Why: with `model_norm: allowed` the beam search reads the logits of the tokens the
constraint allows and nothing else, yet the exported decoder multiplies every row by the
whole [d_model x vocabulary] projection (about two fifths of a t5-small step's
multiply-adds), and onnxruntime runs every node whatever outputs are fetched. The listed
graph is the cached step with that product replaced by

    logits[r, 0, j] = hidden[r, 0, :] . W[:, ids[r, j]]      ids = allowed_ids, [rows, K]

(a Gather of the projection's columns, then one product per row), so a step costs what its
allowed tokens need. Trellis uses it when the file is there and every running hypothesis of
a step has a listed set of allowed tokens; otherwise (vocabulary normalization, unconstrained
steps) the decoder as exported.

    python tools/train/listed_logits.py MODEL_DIR            # writes MODEL_DIR/decoder_listed_model.onnx

MODEL_DIR: an optimum split export (the graph comes from `decoder_with_past_model.onnx`) or
a merged one (from the cached branch of `decoder_model_merged.onnx`). The projection must be
one float MatMul by a weight, or an int8 MatMulIntegerToFloat with one weight scale and zero
point (tools/train/static_quant.py's; its listed logits are then the full graph's exactly);
anything else (a per-row quantized projection) is refused by name. The result is checked
against the exported step on random inputs before it is written (largest difference
printed), records the decoder file it was cut from (size and CRC-32: Trellis refuses it
beside another), and the same model gives the same bytes. Run it again after the decoder
changes.
"""

import argparse
import os
import sys
import zlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

OUT_NAME = "decoder_listed_model.onnx"
# What Trellis checks at load (src/model/session/pool.rs, LISTED_SOURCE_KEY): the decoder
# file this step was cut from, as NAME:SIZE:CRC32, so a listed step left beside a re-exported
# or re-quantized decoder is refused instead of scoring with the old weights.
SOURCE_KEY = "trellis.listed_source"
# Trellis pads each row's ids to a multiple of this (LISTED_MULTIPLE, src/decode/beam.rs);
# a float projection is computed in chunks of it.
CHUNK = 16


def source_record(path):
    """NAME:SIZE:CRC32 of a decoder file (what Trellis compares at load)."""
    size, crc = 0, 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            size += len(chunk)
            crc = zlib.crc32(chunk, crc)
    return f"{Path(path).name}:{size}:{crc:08x}"


def fail(msg):
    raise SystemExit(f"listed_logits: {msg}")


def cached_step(model_dir):
    """The cached decoder step as a standalone model, and the file it came from."""
    split = model_dir / "decoder_with_past_model.onnx"
    merged = model_dir / "decoder_model_merged.onnx"
    if split.is_file():
        return onnx.load(split), split
    if not merged.is_file():
        fail(f"{model_dir}: neither decoder_with_past_model.onnx nor decoder_model_merged.onnx")
    m = onnx.load(merged)
    g = m.graph
    ifs = [n for n in g.node if n.op_type == "If"]
    if len(ifs) != 1 or ifs[0].input[0] != "use_cache_branch":
        fail(f"{merged}: not optimum's merged decoder (one If on use_cache_branch)")
    node = ifs[0]
    branch = next(a.g for a in node.attribute if a.name == "then_branch")
    inits = {i.name: i for i in g.initializer}
    producers = {o: n for n in g.node if n is not node for o in n.output}
    inputs = {i.name: i for i in g.input}
    # Everything the cached branch reads from outside it: graph inputs, weights, and the
    # outputs of nodes before the If (with what those read in turn).
    needed_nodes, needed_inits, needed_inputs = [], set(), set()
    local = {o for n in branch.node for o in n.output} | {i.name for i in branch.initializer}
    pending = [i for n in branch.node for i in n.input if i and i not in local]
    pending += [o.name for o in branch.output if o.name not in local]
    seen = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in inits:
            needed_inits.add(name)
        elif name in inputs:
            needed_inputs.add(name)
        elif name in producers:
            p = producers[name]
            if p not in needed_nodes:
                needed_nodes.append(p)
                pending.extend(i for i in p.input if i)
        else:
            fail(f"{merged}: the cached branch reads {name!r}, which nothing defines")
    outer = [n for n in g.node if n in needed_nodes]  # graph order is a topological order
    # The branch's outputs under the If's names (optimum gives them the same ones).
    renames = [helper.make_node("Identity", [b.name], [o], name=f"listed_out_{k}") for k, (b, o) in enumerate(zip(branch.output, node.output)) if b.name != o]
    graph_outputs = {o.name: o for o in g.output}
    out_infos = [graph_outputs[o] if o in graph_outputs else helper.make_empty_tensor_value_info(o) for o in node.output]
    new = helper.make_graph(
        outer + list(branch.node) + renames,
        "decoder_listed",
        [inputs[i.name] for i in g.input if i.name in needed_inputs],
        out_infos,
        [inits[i.name] for i in g.initializer if i.name in needed_inits] + list(branch.initializer),
    )
    out = helper.make_model(new, opset_imports=m.opset_import, ir_version=m.ir_version)
    return out, merged


def list_logits(m, source):
    """Replaces the projection to the vocabulary by the listed tokens' columns; returns the
    projection's shape [d_model, vocabulary]."""
    g = m.graph
    producer = {o: n for n in g.node for o in n.output}
    last = producer.get("logits")
    for _ in range(len(g.node)):  # through renames (Identity), never round a cycle
        if last is None or last.op_type != "Identity":
            break
        last = producer.get(last.input[0])
    inits = {i.name: i for i in g.initializer}
    kind = last.op_type if last is not None else "nothing"
    if kind == "MatMul" and len(last.input) == 2 and last.input[1] in inits and last.input[0] not in inits:
        w_init = inits[last.input[1]]
        if w_init.data_type != onnx.TensorProto.FLOAT:
            fail(f"{source}: the projection's weight is not float32")
    elif kind == "MatMulIntegerToFloat" and last.domain == "com.microsoft" and len(last.input) in (5, 6) and last.input[1] in inits:
        # int8 weights (tools/train/row_quant.py, static_quant.py): the listed columns keep
        # the same integer products, so the logits are the full graph's exactly. A weight
        # scale or zero point per column would need gathering too: not written by Trellis's
        # tools, refused.
        w_init = inits[last.input[1]]
        for i in last.input[3:]:
            if i not in inits or int(np.prod(inits[i].dims)) != 1:
                fail(f"{source}: the int8 projection's weight scale and zero point are not single constants")
    else:
        fail(f"{source}: the logits come from {kind}, not one MatMul (float, or MatMulIntegerToFloat with int8 weights) by a weight")
    w = numpy_helper.to_array(w_init)
    if w.ndim != 2:
        fail(f"{source}: the projection's weight has {w.ndim} dimensions, not 2")
    hidden = last.input[0]
    logits_out = last.output[0]
    consumers = sum(last.input[1] in n.input for n in g.node if n is not last)
    keep_inits = [i for i in g.initializer if i.name != last.input[1] or consumers > 0]
    del g.initializer[:]
    g.initializer.extend(keep_inits)
    g.initializer.append(numpy_helper.from_array(np.ascontiguousarray(w.T), "listed_projection_rows"))
    g.input.append(helper.make_tensor_value_info("allowed_ids", onnx.TensorProto.INT64, ["rows", "listed"]))
    d_model = int(w.shape[0])
    gather = helper.make_node("Gather", ["listed_projection_rows", "allowed_ids"], ["listed_columns"], axis=0, name="listed_gather")
    if kind == "MatMul":
        # Float: one [1 x d] x [d x CHUNK] product per chunk of a row's ids, so each logit
        # comes out of the same kernel whatever the row's width (one [d x K] product per row
        # changed a t5-small's logits in the last bits between K = 32 and 48: a request's
        # numbers would depend on what its batch neighbours allow).
        g.initializer.append(numpy_helper.from_array(np.array([0, -1, CHUNK, d_model], np.int64), "listed_chunked_shape"))
        g.initializer.append(numpy_helper.from_array(np.array([0, 1, 1, d_model], np.int64), "listed_hidden_shape"))
        g.initializer.append(numpy_helper.from_array(np.array([0, 1, -1], np.int64), "listed_logits_shape"))
        added = [
            gather,
            helper.make_node("Reshape", ["listed_columns", "listed_chunked_shape"], ["listed_chunks"], name="listed_chunk"),
            helper.make_node("Transpose", ["listed_chunks"], ["listed_chunks_t"], perm=[0, 1, 3, 2], name="listed_transpose"),
            helper.make_node("Reshape", [hidden, "listed_hidden_shape"], ["listed_hidden"], name="listed_hidden"),
            helper.make_node("MatMul", ["listed_hidden", "listed_chunks_t"], ["listed_chunk_logits"], name="listed_product"),
            helper.make_node("Reshape", ["listed_chunk_logits", "listed_logits_shape"], [logits_out], name="listed_logits"),
        ]
    else:
        # int8: the integer products are exact, so one product per row is the same in any
        # width; the float scales apply per element.
        rest = list(last.input[2:])
        added = [
            gather,
            helper.make_node("Transpose", ["listed_columns"], ["listed_columns_t"], perm=[0, 2, 1], name="listed_transpose"),
            helper.make_node("MatMulIntegerToFloat", [hidden, "listed_columns_t"] + rest, [logits_out], name="listed_product", domain="com.microsoft"),
        ]
    nodes = []
    for n in g.node:
        if n is last:
            nodes += added
        else:
            nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)
    for o in g.output:
        if o.name == "logits":
            o.CopyFrom(helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["rows", 1, "listed"]))
    if not any(op.domain == "com.microsoft" for op in m.opset_import) and kind != "MatMul":
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return w.shape


def check(model_dir, source, listed_path, d_model, vocab):
    """The listed graph's logits against the exported step's at the same ids, on random
    inputs; returns the largest difference."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    full = ort.InferenceSession(str(source), so, providers=["CPUExecutionProvider"])
    part = ort.InferenceSession(str(listed_path), so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    rows, src, past, k = 3, 7, 4, 2 * CHUNK
    feed = {}
    for i in full.get_inputs():
        shape = i.shape
        if i.name == "input_ids":
            feed[i.name] = rng.integers(2, vocab, (rows, 1)).astype(np.int64)
        elif i.name == "encoder_attention_mask":
            feed[i.name] = np.ones((rows, src), np.int64)
        elif i.name == "encoder_hidden_states":
            feed[i.name] = rng.standard_normal((rows, src, d_model)).astype(np.float32)
        elif i.name == "use_cache_branch":
            feed[i.name] = np.array([True])
        elif i.name.startswith("past_key_values."):
            heads, d_kv = shape[1], shape[3]
            if not isinstance(heads, int) or not isinstance(d_kv, int):
                fail(f"{source}: {i.name} has no fixed heads and d_kv")
            n = src if ".encoder." in i.name else past
            feed[i.name] = rng.standard_normal((rows, heads, n, d_kv)).astype(np.float32)
        else:
            fail(f"{source}: an input the check does not fill: {i.name}")
    ids = rng.integers(0, vocab, (rows, k)).astype(np.int64)
    whole = full.run(["logits"], feed)[0][:, 0, :]
    names = {i.name for i in part.get_inputs()}
    got = part.run(["logits"], {n: v for n, v in dict(feed, allowed_ids=ids).items() if n in names})[0][:, 0, :]
    worst = float(np.max(np.abs(np.take_along_axis(whole, ids, 1) - got)))
    if not worst <= 1e-4 * max(1.0, float(np.max(np.abs(whole)))):
        fail(f"{listed_path}: its logits differ from {source.name}'s by {worst}")
    # A row's logits must be the same bits however wide the step is (Trellis pads every
    # row to the batch's longest list): the same ids padded to 3 and 64 chunks.
    for width in (3 * CHUNK, 64 * CHUNK):
        wide = np.zeros((rows, width), np.int64)
        wide[:, :k] = ids
        again = part.run(["logits"], {n: v for n, v in dict(feed, allowed_ids=wide).items() if n in names})[0][:, 0, :k]
        if not np.array_equal(again.view(np.uint32), got.view(np.uint32)):
            fail(f"{listed_path}: a row's logits change with the step's width ({k} and {width} ids): answers would depend on the batch")
    return worst


def write(model_dir):
    """Writes MODEL_DIR/decoder_listed_model.onnx (checked first); returns what was done."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        fail(f"{model_dir}: not a directory")
    m, source = cached_step(model_dir)
    d_model, vocab = list_logits(m, source)
    del m.metadata_props[:]
    m.metadata_props.add(key=SOURCE_KEY, value=source_record(source))
    out = model_dir / OUT_NAME
    tmp = out.with_suffix(".onnx.partial")
    onnx.save(m, tmp)
    try:
        worst = check(model_dir, source, tmp, d_model, vocab)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, out)
    return f"{out}: written ({source.name}'s cached step, projection {d_model} x {vocab} by listed ids; largest difference from it {worst:.1e})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, help="a model directory (an optimum split or merged export)")
    args = ap.parse_args()
    print(write(args.model))


if __name__ == "__main__":
    sys.exit(main())
