#!/usr/bin/env python3
"""Exports a trained retriever or response generator (a transformers T5 saved with
`save_pretrained`) to the model directory Trellis loads (schema/model.md): optimum's ONNX files
through the same code as the golden fixtures (tools/train/t5.py `export`), checked
against PyTorch with onnxruntime before anything is written, then `config.json`,
`tokenizer.json` and `trellis.json` (its `task` says which: a generator is also checked by
greedy decoding with onnxruntime against transformers `generate`).

    PY=$(bash tools/venv.sh train)
    $PY tools/train/export.py --hf RUN/retrieval/best/hf --tokenizer RUN/tokenizer.json \
        --trellis-json tools/train/trellis.json --out models/gsr-opendialkg [--layout merged] [--quantize]
    $PY tools/train/export.py --hf RUN/generator/best/hf --tokenizer RUN/tokenizer.json \
        --trellis-json tools/train/generator.json --out models/generator-opendialkg [--quantize]

`--layout merged` (default) writes one decoder file (`decoder_model_merged.onnx`), so the
decoder's weights are stored once; `split` writes the two decoder files. `--quantize` stores
the weights of the matrix products as int8, about a quarter of the size, and quantizes their
activations per row at run time (tools/train/row_quant.py), so a request's answer does not
depend on the other requests of its batch; its cost on dev is measured, not assumed
(docs/results-2026-11-25.md, "Batch independence"). `--calibration FILE` (with `--quantize`
and the merged layout) then makes those scales constants calibrated on FILE, `trellis
targets` output of training dialogs (tools/train/static_quant.py): batch-independent too,
and cheaper at run time. A retriever (float, or with `--calibration`) also gets its
listed-logits step, `decoder_listed_model.onnx` (tools/train/listed_logits.py).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

# optimum's decoder merge walks Python sets: fixed string hashing makes the file reproducible.
if __name__ == "__main__" and os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

# A neighbour in tools/train/ (this file runs as a script: its folder is on sys.path).
import t5  # noqa: E402

# A generator's check inputs: DialogGSR's encoding (schema/model.md) of two turns, and the
# start of a reply.
GENERATOR_TEXTS = [
    "knowledge: [Head] jordan spieth [Int1] sport played [Int2] golf [Tail]</s>dialogue: do you know anything about jordan spieth?",
    "knowledge: [Head] tom hanks [Rev1] starred actors [Rev2] forrest gump [Tail]</s>dialogue: i like tom hanks.",
]
GENERATOR_REPLIES = ["yes, he plays golf.", "he was great in forrest gump."]


def quantize(folder, merged):
    """int8 weights for every file; for the merged layout the two decoders are quantized
    apart and then merged: quantize_dynamic does not reach the matrix products inside the
    merged graph's `If` branches (their weights are the outer graph's), and merging after
    keeps each quantized weight once (the two files' copies are identical). Last, every
    file's per-tensor activation quantization becomes per-row (row_quant.py)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    import row_quant

    for f in sorted(Path(folder).glob("*.onnx")):
        q = f.with_suffix(".q.onnx")
        quantize_dynamic(str(f), str(q), weight_type=QuantType.QInt8, per_channel=False)
        os.replace(q, f)
    if merged:
        from optimum.onnx import merge_decoders

        folder = Path(folder)
        first, with_past = folder / "decoder_model.onnx", folder / "decoder_with_past_model.onnx"
        # strict=False as optimum merges T5: the with-past graph has no encoder present.* outputs.
        merge_decoders(first, with_past, save_path=folder / "decoder_model_merged.onnx", strict=False)
        first.unlink()
        with_past.unlink()
    for f in sorted(Path(folder).glob("*.onnx")):
        model = onnx.load(str(f))
        row_quant.convert(model)
        onnx.checker.check_model(model)
        onnx.save(model, str(f))


def ort_greedy(onnx_dir, merged, cfg, input_ids, max_new_tokens):
    """Greedy decoding of one input with onnxruntime, cached, as the runtime runs the graphs;
    EOS is never picked (every step of the cache is exercised, however early a barely trained
    model would stop)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = lambda name: ort.InferenceSession(str(Path(onnx_dir) / name), so, providers=["CPUExecutionProvider"])  # noqa: E731
    ids = np.array([input_ids], dtype=np.int64)
    mask = np.ones_like(ids)
    hidden = sess("encoder_model.onnx").run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]
    first, later = (sess("decoder_model_merged.onnx"),) * 2 if merged else (sess("decoder_model.onnx"), sess("decoder_with_past_model.onnx"))
    past, out, token = {}, [], cfg.decoder_start_token_id
    for k in range(max_new_tokens):
        s = first if k == 0 else later
        names = {i.name for i in s.get_inputs()}
        feed = {"input_ids": np.array([[token]], dtype=np.int64), "encoder_attention_mask": mask}
        if "encoder_hidden_states" in names:
            feed["encoder_hidden_states"] = hidden
        if merged:
            feed["use_cache_branch"] = np.array([k > 0])
        for n in names:
            if n.startswith("past_key_values."):
                feed[n] = past.get(n, np.zeros((1, cfg.num_heads, 0, cfg.d_kv), np.float32))
        res = dict(zip([o.name for o in s.get_outputs()], s.run(None, feed)))
        for n, v in res.items():
            pn = "past_key_values." + n[len("present.") :]
            # The encoder's K/V come from the first step; later ones may re-emit nothing useful.
            if n.startswith("present.") and not (".encoder." in n and pn in past):
                past[pn] = v
        logits = res["logits"][0, -1].copy()
        logits[cfg.eos_token_id] = -np.inf
        token = int(logits.argmax())
        out.append(token)
    return out


def check_greedy(onnx_dir, merged, model, inputs, max_new_tokens):
    """Tokens of onnxruntime's greedy decoding (`max_new_tokens`, no EOS) that agree with
    transformers `generate` (the common prefix), and the tokens compared."""
    same = total = 0
    for ids in inputs:
        with torch.no_grad():
            ref = model.generate(
                torch.tensor([ids]), max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens, num_beams=1, do_sample=False
            )[0, 1:].tolist()
        got = ort_greedy(onnx_dir, merged, model.config, ids, max_new_tokens)
        same += next((i for i, (a, b) in enumerate(zip(ref, got)) if a != b), min(len(ref), len(got)))
        total += max(len(ref), len(got))
    return same, total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hf", type=Path, required=True, help="the saved transformers model")
    ap.add_argument("--tokenizer", type=Path, required=True)
    ap.add_argument("--trellis-json", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--layout", choices=["merged", "split"], default="merged")
    ap.add_argument("--quantize", action="store_true")
    ap.add_argument("--calibration", type=Path, help="with --quantize: `trellis targets` JSONL of training turns; constant activation scales")
    ap.add_argument("--calibration-turns", type=int, default=2000)
    args = ap.parse_args()
    if args.calibration and not (args.quantize and args.layout == "merged"):
        raise SystemExit("export: --calibration needs --quantize and the merged layout")
    if args.calibration and not args.calibration.is_file():
        raise SystemExit(f"export: {args.calibration}: no such file")

    from transformers import T5ForConditionalGeneration

    torch.set_num_threads(1)
    model = T5ForConditionalGeneration.from_pretrained(str(args.hf)).eval()
    samples = None
    if args.calibration:
        import static_quant

        # Read (and checked against the vocabulary) before the export's minutes, not after.
        samples = static_quant.read_samples(args.calibration, args.calibration_turns, model.config.vocab_size)
    tok = Tokenizer.from_file(str(args.tokenizer))
    spec = json.loads(args.trellis_json.read_text())
    is_generator = spec.get("task", "retriever") == "generator"
    merged = args.layout == "merged"
    with tempfile.TemporaryDirectory() as tmp:
        onnx_dir = Path(tmp) / "onnx"
        # Quantized: exported split, quantized, then merged (see quantize).
        t5.export(args.hf, onnx_dir, merged and not args.quantize)
        # The check: two real inputs and a few cached decoder steps.
        if is_generator:
            enc = [tok.encode(t).ids for t in GENERATOR_TEXTS]
            dec = torch.tensor([[0] + tok.encode(r, add_special_tokens=False).ids[:3] for r in GENERATOR_REPLIES])
        else:
            texts = ["do you know anything about jordan spieth? [Ent0] jordan spieth", "i like tom hanks. [Ent0] tom hanks"]
            enc = [tok.encode(t).ids for t in texts]
            t = tok.token_to_id
            dec = torch.tensor([[0, t("[Head]"), 5, 6], [0, t("[Head]"), 7, t("[Int1]")]])
        n = max(map(len, enc))
        ids = torch.tensor([e + [0] * (n - len(e)) for e in enc])
        mask = (ids != 0).long()
        if args.quantize:
            quantize(onnx_dir, merged)
            # int8 weights move the logits by more than float rounding: checked loosely here,
            # on dev path@k (a generator: dev responses) by the caller.
            worst = t5.verify(onnx_dir, merged, model, ids, mask, dec, tol=0.5)
        else:
            worst = t5.verify(onnx_dir, merged, model, ids, mask, dec)
        greedy = ""
        if is_generator:
            same, total = check_greedy(onnx_dir, merged, model, enc, spec.get("generation", {}).get("max_new_tokens", 64))
            # Float graphs must pick the same tokens; int8 ones may part ways after a near tie.
            assert args.quantize or same == total, f"greedy decoding: onnxruntime agrees with generate on {same} of {total} tokens"
            greedy = f", greedy {same}/{total} tokens as generate"
        out = args.out
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        for f in onnx_dir.iterdir():
            shutil.copy(f, out / f.name)
    cfg = model.config.to_dict()
    # The exported graphs run without dropout; the field would only mislead a reader.
    model.config.dropout_rate = 0.0
    model.config.to_json_file(out / "config.json")
    # Byte for byte: the store's token index is keyed by the file's fingerprint.
    shutil.copyfile(args.tokenizer, out / "tokenizer.json")
    (out / "trellis.json").write_text(json.dumps(spec, indent=2) + "\n")
    static = ""
    if samples is not None:
        # Converted beside OUT and moved into place: a failure leaves no half-converted model.
        part = out.with_name(out.name + ".static-part")
        shutil.rmtree(part, ignore_errors=True)
        shutil.copytree(out, part)
        try:
            static = ", " + static_quant.make_static(part, samples)
            worst = max(worst, t5.verify(part, merged, model, ids, mask, dec, tol=0.5))
        except BaseException:
            shutil.rmtree(part, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            raise
        shutil.rmtree(out)
        part.rename(out)
        if greedy:
            greedy += " (per-row graphs)"
    listed = ""
    if not is_generator and (samples is not None or not args.quantize):
        # A retriever decodes with model_norm allowed: its cached steps then need only the
        # allowed tokens' logits (schema/model.md, "Listed logits"). Float and
        # constant-scale projections convert; a per-row one (--quantize alone) does not.
        import listed_logits

        listed_logits.write(out)
        listed = ", listed-logits step"
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"export: {out} ({args.layout}{', int8' if args.quantize else ''}{static}{listed}, {size / 1e6:.1f} MB, onnxruntime vs PyTorch max |diff| {worst:.2e}{greedy}, {cfg['vocab_size']} vocab)", file=sys.stderr)


if __name__ == "__main__":
    main()
