#!/usr/bin/env python3
"""Issue 37: does a request's output depend on the length its batch is padded to?

    python tools/reference/ort_padding.py MODEL_DIR THREADS MULTIPLE MAX_LEN

(numpy and onnxruntime==1.31.1, the wheel whose library the engine loads.) For every request
length n from 1 to MAX_LEN: the request alone, padded to n rounded up to MULTIPLE, decoded 5
greedy steps with the merged decoder and its cache; then the same request padded to every
longer multiple of MULTIPLE up to MAX_LEN, alone and beside two full-length requests. Counts
the cases whose logits differ in any bit.

2026-11-28, the shipped models on this machine (AVX-512), 1 and 2 threads:
- MULTIPLE 1 (pad to the longest input, what Trellis did before padding to input.max_tokens):
  many cases differ by 1e-6..3e-6 (e.g. a 46-token request padded to 48..128, a 45-token one
  padded to 46 or 47); requests whose length is a multiple of 4 never do. The encoder's
  states stay bit-identical: the decoder's cross-attention differs. onnxruntime's kernel for a
  one-row product with a transposed matrix (MlasSgemmKernelM1TransposeBAvx: one query row
  against every key position) takes the positions four at a time, then two, then one, and
  each group reduces its lanes in another order, so the last (length mod 4) positions get
  scores rounded another way than in a group of four.
- MULTIPLE 4 and 8: 0 cases differ (models/gsr-opendialkg to 128 tokens: 0 of 3,968 on 1 and
  on 2 threads; models/generator-opendialkg to 192: 0 of 9,024). Trellis pads every batch to
  its longest input rounded up to 8 (src/model/session/steps.rs, PAD_MULTIPLE).
An earlier version of this script tried one 70-token request only, whose scores happened to
be the same in every batch, and wrongly cleared onnxruntime.
"""
import sys

import numpy as np
import onnxruntime as ort

model, threads, multiple, max_len = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
so = ort.SessionOptions()
so.intra_op_num_threads = threads
enc = ort.InferenceSession(f"{model}/encoder_model.onnx", so, providers=["CPUExecutionProvider"])
dec = ort.InferenceSession(f"{model}/decoder_model_merged.onnx", so, providers=["CPUExecutionProvider"])
past_inputs = [i for i in dec.get_inputs() if i.name.startswith("past_key_values")]
heads, d_kv = int(past_inputs[0].shape[1]), int(past_inputs[0].shape[3])
outs = [o.name for o in dec.get_outputs()]
rng = np.random.default_rng(1)
other = rng.integers(5, 8000, size=max_len)


def decode(request, padded, extra_rows=0, steps=5):
    """Logits of row 0 at each step: `request` padded to `padded`, beside `extra_rows`
    requests of the full padded length."""
    rows = 1 + extra_rows
    ids = np.zeros((rows, padded), dtype=np.int64)
    mask = np.zeros_like(ids)
    ids[0, : len(request)] = request
    mask[0, : len(request)] = 1
    ids[1:, :] = other[:padded]
    mask[1:, :] = 1
    hidden = enc.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    token = np.zeros((rows, 1), dtype=np.int64)
    past = {i.name: np.zeros((rows, heads, 0, d_kv), np.float32) for i in past_inputs}
    logits = []
    for step in range(steps):
        feed = {"encoder_attention_mask": mask, "input_ids": token, "encoder_hidden_states": hidden, "use_cache_branch": np.array([step > 0])}
        feed.update(past)
        out = dict(zip(outs, dec.run(None, feed)))
        last = out["logits"][:, -1]
        logits.append(last[0].copy())
        token = np.argmax(last, -1).reshape(rows, 1).astype(np.int64)
        for name in past:
            if step == 0 or ".decoder." in name:
                past[name] = out[name.replace("past_key_values", "present")]
    return np.stack(logits)


differ, cases, worst, examples = 0, 0, 0.0, []
for n in range(1, max_len + 1):
    request = rng.integers(5, 8000, size=n)
    base = -(-n // multiple) * multiple
    reference = decode(request, base)
    for padded in range(base + multiple, max_len + 1, multiple):
        for extra in (0, 2):
            cases += 1
            got = decode(request, padded, extra)
            if not np.array_equal(got, reference):
                differ += 1
                worst = max(worst, float(np.abs(got - reference).max()))
                if len(examples) < 3:
                    examples.append(f"{n} tokens padded to {padded} beside {extra} rows")
print(f"{model}, {threads} thread(s), padded to multiples of {multiple} up to {max_len}: {differ} of {cases} cases differ"
      + (f" (largest {worst:.2e}; e.g. {'; '.join(examples)})" if differ else ""))
