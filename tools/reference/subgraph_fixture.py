#!/usr/bin/env python3
"""The subgraph model's test fixture (issue 23, `--retriever surge`): a tiny random model of
the class tools/train/surge.py trains and ships (`Surge`), exported to ONNX as surge.py
exports it (float), and what PyTorch computes on a few hand-made subgraphs, for the Rust
runtime to match.

    PY=$(bash tools/venv.sh train)
    $PY tools/reference/subgraph_fixture.py --out tests/fixtures/encoders/subgraph [--force]

Writes model.onnx, config.json, tokenizer.json (the T5-style tokenizer of
encoder_fixtures.py, built from the sample KG's names), trellis.json (task `subgraph`,
max_length 24, name_length 4, turns 2) and goldens.json: per case the texts (query,
entities, mentioned flags, relations, facts), the ids the tokenizers library gives (query
with `</s>`, cut at 24; names without special tokens, cut at 4) and PyTorch's fact scores.
Before anything is written, onnxruntime runs model.onnx on every case (names padded as the
engine pads them) and must agree with PyTorch within 1e-5.

Weights: the T5 encoder (d_model 32, 2 layers) drawn by transformers after a fixed seed;
every other parameter drawn from N(0, 0.3) after the same seed (the trainer starts the
mention vector at zero, which would leave that input untested). The scores mean nothing.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools/train"))
sys.path.insert(0, str(ROOT / "tools/reference"))
import surge  # noqa: E402
from encoder_fixtures import T5_SHAPE, VOCAB_SIZE, corpus, t5_tokenizer  # noqa: E402

SEED = 23
MAX_LENGTH = 24
NAME_LENGTH = 4
TURNS = 2
TOL = 1e-5

CASES = [
    {
        "query": "He starred in Forrest Gump. | Do you like Tom Hanks?",
        "entities": ["Tom Hanks", "Forrest Gump", "Drama", ""],
        "mentioned": [True, True, False, False],
        "relations": ["starred actors", "has genre"],
        "facts": [[1, 0, 0], [1, 1, 2], [3, 1, 2]],
    },
    {
        # One fact, an entity related to itself.
        "query": "who directed 13 Going on 30?",
        "entities": ["13 Going on 30"],
        "mentioned": [True],
        "relations": ["directed by"],
        "facts": [[0, 0, 0]],
    },
    {
        # The query cut at 24 tokens, names cut at 4, an unused entity and relation,
        # accents, case, the same fact twice.
        "query": "I really liked Catch Me If You Can, which starred Leonardo DiCaprio and Tom Hanks, was directed by Steven Spielberg in 2002 and had music by John Williams",
        "entities": ["Catch Me If You Can (the 2002 film)", "Leonardo DiCaprio", "Steven Spielberg", "John Williams", "Café Müller", "TOM HANKS"],
        "mentioned": [True, True, False, False, False, True],
        "relations": ["starred actors", "directed by", "music by", "an unused relation with a long name"],
        "facts": [[0, 0, 1], [0, 1, 2], [0, 2, 3], [2, 1, 0], [5, 0, 0], [0, 0, 1]],
    },
]


def ids_of(tok, case):
    from tokenizers import Tokenizer

    cut = Tokenizer.from_str(tok.to_str())
    cut.enable_truncation(MAX_LENGTH, strategy="longest_first", direction="right")
    query = cut.encode(case["query"]).ids
    name = lambda t: tok.encode(t, add_special_tokens=False).ids[:NAME_LENGTH]  # noqa: E731
    return {
        "input_ids": query,
        "entity_ids": [name(e) for e in case["entities"]],
        "relation_ids": [name(r) for r in case["relations"]],
    }


def row_of(ids, case):
    eids, emask = surge.padded(ids["entity_ids"])
    rids, rmask = surge.padded(ids["relation_ids"])
    f = np.array(case["facts"], dtype=np.int64)
    return {
        "input_ids": np.array([ids["input_ids"]], dtype=np.int64), "entity_ids": eids, "entity_mask": emask,
        "entity_mentioned": np.array(case["mentioned"], dtype=np.float32), "relation_ids": rids, "relation_mask": rmask,
        "fact_head": f[:, 0].copy(), "fact_relation": f[:, 1].copy(), "fact_tail": f[:, 2].copy(),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    if args.out.exists() and not args.force:
        sys.exit(f"{args.out} exists: the committed fixture is frozen (--force to remake it)")
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    tok = t5_tokenizer(corpus())
    tok.no_truncation()
    tok.no_padding()
    from transformers import T5Config, T5EncoderModel

    cfg = T5Config(vocab_size=VOCAB_SIZE, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, **T5_SHAPE)
    enc = T5EncoderModel(cfg).eval()
    model = surge.Surge(enc, width=16, layers=2).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.startswith("encoder."):
                p.normal_(0.0, 0.3)
    goldens = {"max_length": MAX_LENGTH, "name_length": NAME_LENGTH, "turns": TURNS, "cases": []}
    rows = []
    for case in CASES:
        ids = ids_of(tok, case)
        row = row_of(ids, case)
        with torch.no_grad():
            scores = model(*surge.inputs_of(row)).numpy()
        goldens["cases"].append(dict(case, **ids, fact_scores=[float(x) for x in scores]))
        rows.append(row)
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "model.onnx"
        with torch.no_grad():
            torch.onnx.export(model, tuple(surge.inputs_of(rows[0])), str(f), input_names=surge.INPUTS, output_names=["fact_scores"],
                              dynamic_axes=surge.AXES, opset_version=18, dynamo=False)
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(str(f), so, providers=["CPUExecutionProvider"])
        worst = 0.0
        for row, g in zip(rows, goldens["cases"]):
            # The engine pads the query to a power of two from 8 (here: 8, 16 or 24).
            n = row["input_ids"].shape[1]
            s = min(max(8, 1 << (n - 1).bit_length()), MAX_LENGTH)
            x = {k: v.numpy() for k, v in zip(surge.INPUTS, surge.inputs_of(row))}
            x["input_ids"] = np.pad(x["input_ids"], ((0, 0), (0, s - n)))
            x["attention_mask"] = np.pad(x["attention_mask"], ((0, 0), (0, s - n)))
            got = sess.run(["fact_scores"], x)[0]
            worst = max(worst, float(np.abs(got - np.array(g["fact_scores"])).max()))
        assert worst < TOL, f"onnxruntime differs from PyTorch by {worst}"
        goldens["ort_max_abs_diff"] = worst
        goldens["versions"] = {"torch": torch.__version__, "onnxruntime": ort.__version__, "transformers": __import__("transformers").__version__}
        if args.out.exists():
            shutil.rmtree(args.out)
        args.out.mkdir(parents=True)
        shutil.copy(f, args.out / "model.onnx")
    cfg.architectures = ["T5EncoderModel"]
    cfg.to_json_file(args.out / "config.json")
    tok.save(str(args.out / "tokenizer.json"))
    (args.out / "trellis.json").write_text(json.dumps(surge.spec(MAX_LENGTH, TURNS, NAME_LENGTH), indent=2) + "\n")
    (args.out / "goldens.json").write_text(json.dumps(goldens, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out} (onnxruntime within {worst:.1e} of PyTorch)", file=sys.stderr)


if __name__ == "__main__":
    main()
