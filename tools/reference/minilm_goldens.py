#!/usr/bin/env python3
"""Goldens of the shipped MiniLM cross-encoder and bi-encoder on their real weights (issue 36).

    PY=$(bash tools/venv.sh encoders)
    $PY tools/reference/minilm_goldens.py --model models/rerank-minilm-opendialkg \
        --weights RUN/rerank-found/epoch-2/weights.pt --init ~/.cache/trellis/minilm/st \
        --out tests/fixtures/encoders/minilm-rerank-goldens.json
    $PY tools/reference/minilm_goldens.py --task dense --model models/dense-minilm-opendialkg \
        --weights RUN/dense/epoch-1/weights.pt --init ~/.cache/trellis/minilm/st \
        --out tests/fixtures/encoders/minilm-dense-goldens.json

With `--task dense` (the bi-encoder), the same dialogs' queries and paths are single texts:
their ids, `vectors_int8` (onnxruntime's last_hidden_state, mean-pooled over the mask and
normalized: what the engine computes) and `vectors_float` (the fine-tuned PyTorch model, the
same pooling), with the export check's tolerance (0.05 a float) recorded beside them.

For a fixed list of (dialog, path) pairs, written as the engine writes them (the query the
last 3 messages newest first, a path "head relation tail ..."; tools/train/encoders.py), it
records:
- the pretrained WordPiece tokenizer's token and segment ids (`tokenizers`, the model's
  tokenizer.json, longest-first truncation to the model's max_length): the pairs include
  capitals, accents, punctuation, digits, non-Latin script and texts past the length;
- `logits_int8`: onnxruntime on the shipped model.onnx (int8), each pair alone;
- `logits_float`: the fine-tuned PyTorch model (the weights the int8 file was exported from,
  on the transformers BERT of all-MiniLM-L6-v2) on the same ids;
- the sha256 of model.onnx, so a test knows the goldens belong to the shipped file.

tests/integration/shipped_model.rs checks the engine against them: the ids exactly, the int8
logits within 1e-4 (the same file, another build of the runtime), and against PyTorch within
the tolerance the export check uses (a tenth of the logits' spread). Before writing, this
script checks that onnxruntime gives each row the same logit alone and in one batch.
"""
import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "train"))
import encoders as enc  # noqa: E402

DIALOGS = [
    (["Do you like Tom Hanks?", "Yes, I loved him in Forrest Gump."],
     [[("Forrest Gump", "starred_actors", "Tom Hanks")],
      [("Forrest Gump", "directed_by", "Robert Zemeckis")],
      [("Tom Hanks", "~starred_actors", "Cast Away"), ("Cast Away", "directed_by", "Robert Zemeckis")]]),
    (["I just watched Amélie, it's so French!", "Jean-Pierre Jeunet made it, right?"],
     [[("Amélie", "directed_by", "Jean-Pierre Jeunet")],
      [("Amélie", "starred_actors", "Audrey Tautou")],
      [("Amélie", "release_year", "2001")]]),
    (["Who wrote The Magician's Land?", "Lev Grossman. He also wrote The Magicians.", "Could you recommend something similar?"],
     [[("The Magician's Land", "written_by", "Lev Grossman")],
      [("Lev Grossman", "~written_by", "The Magicians"), ("The Magicians", "has_genre", "Fantasy")],
      [("The Magician's Land", "Has_genre", "Fantasy-Fiction")]]),
    (["BEYONCÉ!!! Her 2016 album Lemonade is AMAZING...", "Do you know Jay-Z?"],
     [[("Beyoncé", "~Spouse_(or_domestic_partner)", "Jay-Z")],
      [("Lemonade", "artist", "Beyoncé")],
      [("Jay-Z", "Profession", "Record producer")]]),
    (["我喜欢宫崎骏的电影", "Spirited Away (千と千尋の神隠し) is great"],
     [[("Spirited Away", "directed_by", "Hayao Miyazaki")],
      [("Spirited Away", "written_by", "宮崎駿")]]),
    # Past max_length: the query alone is longer than the pair's budget.
    ([" ".join(["I really enjoyed the long and winding story of the film,"] * 12), "what else did the director make?"],
     [[("The Lord of the Rings: The Fellowship of the Ring", "directed_by", "Peter Jackson")],
      [("Peter Jackson", "~directed_by", "King Kong"), ("King Kong", "release_year", "2005"),
       ("King Kong", "starred_actors", "Naomi Watts")]]),
]


def pairs(turns):
    out = []
    for history, paths in DIALOGS:
        q = enc.query_text(history, turns)
        for p in paths:
            out.append((q, enc.path_text([enc.stored(t) for t in p])))
    return out


def texts(turns):
    """The bi-encoder's texts: each dialog's query, then its paths."""
    out = []
    for history, paths in DIALOGS:
        out.append(enc.query_text(history, turns))
        out.extend(enc.path_text([enc.stored(t) for t in p]) for p in paths)
    return out


def dense(args):
    import onnxruntime as ort

    torch.set_num_threads(1)
    spec = json.loads((args.model / "trellis.json").read_text())["dense"]
    max_length, turns = spec["max_length"], spec.get("turns", 3)
    if spec.get("pooling", "mean") != "mean" or not spec.get("normalize", False):
        raise SystemExit("these goldens pool by the mask's mean and normalize, as the shipped model does")
    tok = enc.tokenizer(args.model / "tokenizer.json", max_length)
    ts = texts(turns)
    encodings = tok.encode_batch(ts)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(args.model / "model.onnx"), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]

    def run(encs):
        xs = enc.tensors(encs, types=True)
        feed = dict(zip(["input_ids", "attention_mask", "token_type_ids"], (x.numpy() for x in xs)))
        h = torch.from_numpy(sess.run(["last_hidden_state"], {n: feed[n] for n in names})[0])
        return enc.mean_normalized(h, xs[1]).numpy()

    alone = np.concatenate([run([e]) for e in encodings])
    together = run(encodings)
    worst_batch = float(np.max(np.abs(alone - together)))
    if worst_batch > 1e-5:
        raise SystemExit(f"onnxruntime: a text's vector depends on its batch by {worst_batch:.2e}")
    model = enc.build("dense", args.init, seed=0)
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    model.eval()
    with torch.no_grad():
        flt = np.concatenate([enc.mean_normalized(model(*enc.inputs(model, [e])), enc.inputs(model, [e])[1]).numpy() for e in encodings])
    worst = float(np.max(np.abs(flt - alone)))
    cos = float(np.min(np.sum(flt * alone, axis=1)))
    print(f"{len(ts)} texts; int8 vs float: largest |diff| {worst:.4f}, lowest cosine {cos:.4f}; batch vs alone {worst_batch:.1e}")
    out = {
        "about": "tools/reference/minilm_goldens.py --task dense: the shipped MiniLM bi-encoder on its real weights",
        "model_sha256": hashlib.sha256((args.model / "model.onnx").read_bytes()).hexdigest(),
        "max_length": max_length,
        "texts": ts,
        "input_ids": [e.ids for e in encodings],
        "vectors_int8": [[round(float(x), 7) for x in v] for v in alone],
        "vectors_float": [[round(float(x), 7) for x in v] for v in flt],
        "float_tolerance": 0.05,
        "versions": {"onnxruntime": ort.__version__, "torch": torch.__version__, "tokenizers": __import__("tokenizers").__version__},
    }
    args.out.write_text(json.dumps(out, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=["rerank", "dense"], default="rerank")
    ap.add_argument("--model", type=Path, required=True, help="the shipped int8 model directory")
    ap.add_argument("--weights", type=Path, required=True, help="the float weights it was exported from (epoch-N/weights.pt)")
    ap.add_argument("--init", type=Path, required=True, help="the extracted all-MiniLM-L6-v2 (its config and architecture)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.task == "dense":
        return dense(args)
    import onnxruntime as ort

    torch.set_num_threads(1)
    spec = json.loads((args.model / "trellis.json").read_text())["rerank"]
    max_length, turns = spec["max_length"], spec.get("turns", 3)
    tok = enc.tokenizer(args.model / "tokenizer.json", max_length)
    ps = pairs(turns)
    encodings = tok.encode_batch(ps)

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(args.model / "model.onnx"), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]

    def run(encs):
        xs = enc.tensors(encs, types=True)
        feed = dict(zip(["input_ids", "attention_mask", "token_type_ids"], (x.numpy() for x in xs)))
        return sess.run(["logits"], {n: feed[n] for n in names})[0][:, 0]

    alone = np.array([run([e])[0] for e in encodings])
    together = run(encodings)
    worst_batch = float(np.max(np.abs(alone - together)))
    if worst_batch > 1e-5:
        raise SystemExit(f"onnxruntime: a row's logit depends on its batch by {worst_batch:.2e}")

    model = enc.build("rerank", args.init, seed=0)
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    model.eval()
    with torch.no_grad():
        flt = np.array([model(*enc.inputs(model, [e]))[0, 0].item() for e in encodings])
    spread = float(flt.max() - flt.min())
    worst = float(np.max(np.abs(flt - alone)))
    print(f"{len(ps)} pairs; int8 vs float: largest |diff| {worst:.3f}, logits spread {spread:.3f}; batch vs alone {worst_batch:.1e}")

    out = {
        "about": "tools/reference/minilm_goldens.py: the shipped MiniLM cross-encoder on its real weights",
        "model_sha256": hashlib.sha256((args.model / "model.onnx").read_bytes()).hexdigest(),
        "max_length": max_length,
        "pairs": [list(p) for p in ps],
        "input_ids": [e.ids for e in encodings],
        "token_type_ids": [e.type_ids for e in encodings],
        "logits_int8": [float(x) for x in alone],
        "logits_float": [float(x) for x in flt],
        "float_tolerance": round(spread / 10, 6),
        "versions": {"onnxruntime": ort.__version__, "torch": torch.__version__, "tokenizers": __import__("tokenizers").__version__},
    }
    args.out.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
