#!/usr/bin/env python3
"""Exports a trained retriever (a transformers T5 saved with `save_pretrained`) to the model
directory Trellis loads (schema/model.md): optimum's ONNX files through the same code as the
golden fixtures (tools/gsr/make_fixture.py `export`), checked against PyTorch with onnxruntime
before anything is written, then `config.json`, `tokenizer.json` and `trellis.json`.

    PY=$(tools/gsr/venv.sh)
    $PY tools/train/export.py --hf RUN/retrieval/best/hf --tokenizer RUN/tokenizer.json \
        --trellis-json tools/train/trellis.json --out models/gsr-opendialkg [--layout merged] [--quantize]

`--layout merged` (default) writes one decoder file (`decoder_model_merged.onnx`), so the
decoder's weights are stored once; `split` writes the two decoder files. `--quantize` stores
the weights of the matrix products as int8 (onnxruntime's dynamic quantization), about a
quarter of the size; its cost on dev is measured, not assumed (README).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gsr"))

import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

import make_fixture as mf  # noqa: E402


def quantize(folder):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    for f in sorted(Path(folder).glob("*.onnx")):
        q = f.with_suffix(".q.onnx")
        quantize_dynamic(str(f), str(q), weight_type=QuantType.QInt8, per_channel=False)
        os.replace(q, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hf", type=Path, required=True, help="the saved transformers model")
    ap.add_argument("--tokenizer", type=Path, required=True)
    ap.add_argument("--trellis-json", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--layout", choices=["merged", "split"], default="merged")
    ap.add_argument("--quantize", action="store_true")
    args = ap.parse_args()
    from transformers import T5ForConditionalGeneration

    torch.set_num_threads(1)
    model = T5ForConditionalGeneration.from_pretrained(str(args.hf)).eval()
    tok = Tokenizer.from_file(str(args.tokenizer))
    merged = args.layout == "merged"
    with tempfile.TemporaryDirectory() as tmp:
        onnx_dir = Path(tmp) / "onnx"
        mf.export(args.hf, onnx_dir, merged)
        # The check: two real inputs and a few cached decoder steps.
        texts = ["do you know anything about jordan spieth? [Ent0] jordan spieth", "i like tom hanks. [Ent0] tom hanks"]
        enc = [tok.encode(t).ids for t in texts]
        n = max(map(len, enc))
        ids = torch.tensor([e + [0] * (n - len(e)) for e in enc])
        mask = (ids != 0).long()
        t = tok.token_to_id
        dec = torch.tensor([[0, t("[Head]"), 5, 6], [0, t("[Head]"), 7, t("[Int1]")]])
        if args.quantize:
            quantize(onnx_dir)
            # int8 weights move the logits by more than float rounding: checked loosely here,
            # on dev path@k by the caller.
            worst = mf.verify(onnx_dir, merged, model, ids, mask, dec, tol=0.5)
        else:
            worst = mf.verify(onnx_dir, merged, model, ids, mask, dec)
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
    spec = json.loads(args.trellis_json.read_text())
    (out / "trellis.json").write_text(json.dumps(spec, indent=2) + "\n")
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"export: {out} ({args.layout}{', int8' if args.quantize else ''}, {size / 1e6:.1f} MB, onnxruntime vs PyTorch max |diff| {worst:.2e}, {cfg['vocab_size']} vocab)", file=sys.stderr)


if __name__ == "__main__":
    main()
