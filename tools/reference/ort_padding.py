#!/usr/bin/env python3
"""Issue 37: is onnxruntime itself sensitive to the padded length or to the other rows of a batch?

    PY=$(bash tools/venv.sh encoders); OMP_NUM_THREADS=1 $PY tools/reference/ort_padding.py models/gsr-opendialkg 1

Row 0 (a 70-token request) decoded alone, then inside batches of requests of other lengths
(45..128 tokens; the encoder run together and padded to the longest), greedy with the
merged decoder and its cache, 1 and 5 rows a request: the logits of row 0 are compared bit
for bit. On 2026-11-28 (onnxruntime 1.31.1, the wheel whose library the engine loads) every
case was bit-identical on 1 and 2 threads (docs/batch-jobs.md)."""
import numpy as np, onnxruntime as ort, sys
m = sys.argv[1]; threads = int(sys.argv[2])
so = ort.SessionOptions(); so.intra_op_num_threads = threads
enc = ort.InferenceSession(f"{m}/encoder_model.onnx", so, providers=["CPUExecutionProvider"])
dec = ort.InferenceSession(f"{m}/decoder_model_merged.onnx", so, providers=["CPUExecutionProvider"])
names = [i.name for i in dec.get_inputs()]
outs = [o.name for o in dec.get_outputs()]
rng = np.random.default_rng(0)
reqs = [rng.integers(5, 8000, size=k) for k in [70, 45, 128, 99, 12, 70, 81, 127]]
def run(batch, L=None, steps=16, beams=1):
    L = L or max(len(r) for r in batch)
    x = np.zeros((len(batch), L), dtype=np.int64); mk = np.zeros_like(x)
    for i, r in enumerate(batch):
        x[i, :len(r)] = r; mk[i, :len(r)] = 1
    h = enc.run(None, {"input_ids": x, "attention_mask": mk})[0]
    h = np.repeat(h, beams, 0); mk = np.repeat(mk, beams, 0)
    rows = len(batch) * beams
    tok = np.zeros((rows, 1), dtype=np.int64)
    past = {nm: np.zeros((rows, 4, 0, 64), np.float32) for nm in names if nm.startswith("past_key_values")}
    logs = []
    for s in range(steps):
        feed = {"encoder_attention_mask": mk, "input_ids": tok, "encoder_hidden_states": h, "use_cache_branch": np.array([s > 0])}
        feed.update(past)
        r = dict(zip(outs, dec.run(None, feed)))
        lg = r["logits"][:, -1]
        logs.append(lg[0].copy())
        # each row its own token: beam k of a request takes its k-th best
        order = np.argsort(-lg, axis=-1)
        tok = np.array([[order[i, i % beams]] for i in range(rows)], dtype=np.int64)
        for nm in list(past):
            pn = nm.replace("past_key_values", "present")
            if s == 0 or ".decoder." in nm:
                past[nm] = r[pn]
    return np.stack(logs)
for beams in [1, 5]:
    ref = run(reqs[:1], beams=beams)
    for k in [2, 3, 4, 8]:
        g = run(reqs[:k], beams=beams)
        print(f"threads {threads} beams {beams} batch {k} (padded to {max(len(r) for r in reqs[:k])}): max |diff| {float(np.abs(g - ref).max()):.2e}", "identical" if np.array_equal(g, ref) else "DIFFER")
