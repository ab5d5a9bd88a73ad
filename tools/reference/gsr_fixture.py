#!/usr/bin/env python3
"""The generative retriever's test fixtures: a T5-style tokenizer, a randomly initialised T5
exported to ONNX in both optimum layouts (schema/gsr-decoding.md §1; the split one with its listed-logits
step, tools/train/listed_logits.py), and PyTorch's logits for the Rust
runtime to match.

    PY=$(bash tools/venv.sh train)
    $PY -m tools.reference.gsr_fixture --force     # rewrites tests/fixtures/gsr/{tiny-split,tiny-merged,logits_golden.json}
    $PY -m tools.reference.gsr_fixture --shape t5-small --out ~/.cache/trellis/models/t5-small-random

The committed fixtures are frozen: without `--force` the tiny shape refuses to write over them.
The t5-small shape needs the 32k tokenizer that `cargo bench --bench decode_index` writes to
~/.cache/trellis/bench/t5-unigram-32k-opendialkg.json (it says so when it is missing).

Deterministic: fixed seeds, one thread. The weights are random: the model's outputs mean
nothing, only that Rust computes what PyTorch computes. Every export is checked here against
PyTorch (encoder + 5 cached decoder steps) with onnxruntime before anything is written.
"""
if not __package__:
    raise SystemExit("run it from the repository root as a module: python -m tools.reference.gsr_fixture")
import argparse
import csv
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import tools

if __name__ == "__main__":
    tools.rerun_with_hash_seed(__spec__)

# Before the libraries start their thread pools: one thread keeps training and export reproducible.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

from tools.train import listed_logits, t5  # noqa: E402
from tools.train.linearize import ADDED_TOKENS, check_tokenizer, entity_text, relation_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_KG = ROOT / "tests/fixtures/opendialkg-sample.tsv"
TRAIN_DIALOGS = Path("/work/shared/data/opendialkg/dialogs_train.csv")
FIXTURES = ROOT / "tests/fixtures/gsr"
BENCH_TOKENIZER = Path.home() / ".cache/trellis/bench/t5-unigram-32k-opendialkg.json"

# ---------------------------------------------------------------------------------------
# Data.


def read_kg(path=SAMPLE_KG):
    """The sample's facts as (subject, relation, object); `~r(a, b)` folded into `r(b, a)` as
    the store's load does."""
    facts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 3:
                continue
            s, r, o = cols
            facts.append((o, r[1:], s) if r.startswith("~") else (s, r, o))
    return facts


def dialog_texts(path, limit):
    out = []
    with open(path, encoding="utf-8", newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            if i >= limit:
                break
            for a in json.loads(row["Messages"]):
                if a.get("type") == "chat" and a.get("message"):
                    out.append(a["message"])
    return out


# ---------------------------------------------------------------------------------------
# Tokenizer.


def finish_tokenizer(tok):
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ADDED_TOKENS])
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))])
    return tok


def train_tokenizer(vocab_size, facts, dialogs):
    tok = Tokenizer(models.Unigram())
    # T5's normalization (NFKC, runs of spaces folded) and pre-tokenization (Metaspace): no
    # lowercasing in the tokenizer; paths are lowercased by the linearization.
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(
        vocab_size=vocab_size,
        special_tokens=["<pad>", "</s>", "<unk>"],
        unk_token="<unk>",
        shrinking_factor=0.75,
        max_piece_length=16,
        n_sub_iterations=2,
    )
    corpus = [f"{entity_text(s)} {relation_text(r)} {entity_text(o)}" for s, r, o in facts] + dialogs
    tok.train_from_iterator(corpus, trainer=trainer)
    return finish_tokenizer(tok)


TRELLIS_JSON = {
    "format": 1,
    "task": "retriever",
    "linearization": "dialoggsr",
    "input": {"turns": 3, "speaker_prefix": False, "separator": " ", "max_tokens": 256},
    "decoding": {
        "beams": 5,
        "return_sequences": 5,
        "alpha": 0.8,
        "prior": "katz",
        "prior_norm": "proportional",
        "prior_epsilon": 0.001,
        "length_penalty": 1.0,
        "max_new_tokens": 64,
        "early_stopping": True,
    },
}

# The logits golden: 3 inputs of different lengths (padded in one batch) and, per row, 5
# decoder tokens read one per cached step (the first is the start token).
GOLDEN_TEXTS = [
    "Do you know anything about Jordan Spieth? I know he played Golf",
    "I like Tom Hanks.",
    "What do you think about Carly Rae Jepsen? I only heard one of her songs; Call Me Maybe.",
]


def golden_decoder_ids(tok):
    t = tok.token_to_id
    rows = [
        [0, t("[HEAD]")] + tok.encode("jordan spieth", add_special_tokens=False).ids[:1] + [t("[Int1_1]"), t("[Int1_2]")],
        [0, t("[HEAD]"), t("[Rev1_1]"), 1, 0],
        [0, 5, 6, 7, 8],
    ]
    return torch.tensor(rows, dtype=torch.long)


def write_model_dir(out, model, tok, onnx_src):
    out.mkdir(parents=True, exist_ok=True)
    for f in onnx_src.iterdir():
        shutil.copy(f, out / f.name)
    model.config.to_json_file(out / "config.json")
    tok.save(str(out / "tokenizer.json"), pretty=False)
    (out / "trellis.json").write_text(json.dumps(TRELLIS_JSON, indent=2) + "\n")


def rounded(a, digits=7):
    return [float(f"{x:.{digits}g}") for x in np.asarray(a, dtype=np.float64).ravel()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=["t5-small", "tiny"], default="tiny")
    ap.add_argument("--out", type=Path, help="model directory (t5-small shape: split layout only, nothing else written)")
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--dialogs", type=int, default=1500, help="training dialogs whose text the tiny tokenizer learns from")
    ap.add_argument("--retrain-tokenizer", action="store_true", help="train the tiny tokenizer anew instead of reading the committed one")
    ap.add_argument("--force", action="store_true", help="rewrite the committed (frozen) tiny fixtures")
    args = ap.parse_args()
    if args.shape == "tiny":
        tools.refuse_overwrite([FIXTURES / "tiny-split", FIXTURES / "tiny-merged", FIXTURES / "logits_golden.json"], args.force)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    facts = read_kg()
    if args.shape == "tiny":
        committed = FIXTURES / "tiny-split" / "tokenizer.json"
        if committed.exists() and not args.retrain_tokenizer:
            # The Unigram trainer of tokenizers 0.22 is not bit-reproducible (hash-map order
            # in its float sums: two runs give the same 1500 pieces with scores up to 4e-4
            # apart), so the committed tokenizer is the source of truth; the model and the
            # exports are reproducible from it.
            tok = Tokenizer.from_file(str(committed))
        else:
            tok = train_tokenizer(1500, facts, dialog_texts(TRAIN_DIALOGS, args.dialogs))
    else:
        # The 32k Unigram the benches use, with both presets' boundaries and T5's </s>
        # post-processor added (the tokens it already has keep their ids).
        if not BENCH_TOKENIZER.exists():
            raise SystemExit(
                f"gsr_fixture: {BENCH_TOKENIZER} is missing: the t5-small shape uses the 32k "
                "tokenizer that `cargo bench --bench decode_index` trains and writes there; run it first"
            )
        tok = Tokenizer.from_file(str(BENCH_TOKENIZER))
        tok = finish_tokenizer(tok)
    check_tokenizer(tok, facts)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    model = t5.build(args.shape, vocab, args.seed).eval()
    print(f"tokenizer: {vocab} tokens; model: {sum(p.numel() for p in model.parameters())} parameters", file=sys.stderr)

    enc = tok.encode_batch(GOLDEN_TEXTS)
    longest = max(len(e.ids) for e in enc)
    input_ids = torch.tensor([e.ids + [0] * (longest - len(e.ids)) for e in enc], dtype=torch.long)
    attention_mask = torch.tensor([[1] * len(e.ids) + [0] * (longest - len(e.ids)) for e in enc], dtype=torch.long)
    decoder_ids = golden_decoder_ids(tok)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model.save_pretrained(tmp / "hf")
        tok.save(str(tmp / "hf" / "tokenizer.json"))
        layouts = [False] if args.shape != "tiny" else [False, True]
        worst = {}
        for merged in layouts:
            onnx_dir = tmp / ("merged" if merged else "split")
            t5.export(tmp / "hf", onnx_dir, merged)
            worst["merged" if merged else "split"] = t5.verify(onnx_dir, merged, model, input_ids, attention_mask, decoder_ids)
        print(f"onnxruntime vs PyTorch, largest difference: {worst}", file=sys.stderr)

        if args.shape != "tiny":
            out = args.out or Path.home() / ".cache/trellis/models/t5-small-random"
            write_model_dir(out, model, tok, tmp / "split")
            print(listed_logits.write(out), file=sys.stderr)
            # The PyTorch weights too (not part of the model directory format, ignored by
            # Trellis): tools/bench/gsr_reference.py runs the Python reference from them.
            model.save_pretrained(out)
            print(f"{out}: written", file=sys.stderr)
            return
        FIXTURES.mkdir(parents=True, exist_ok=True)
        for merged in (False, True):
            out = FIXTURES / ("tiny-merged" if merged else "tiny-split")
            shutil.rmtree(out, ignore_errors=True)
            write_model_dir(out, model, tok, tmp / ("merged" if merged else "split"))
        # The split fixture decodes allowed-normalized steps on its listed-logits graph, the
        # merged one on the whole vocabulary: the goldens check both.
        print(listed_logits.write(FIXTURES / "tiny-split"), file=sys.stderr)

    enc_t, steps = t5.torch_reference(model, input_ids, attention_mask, decoder_ids)
    golden = {
        "about": "PyTorch outputs of tests/fixtures/gsr/tiny-*/ (tools/reference/gsr_fixture.py). input_ids/attention_mask: "
        "a padded batch of 3; decoder_input_ids[row][k] is fed at cached step k (k = 0: the start token); "
        "logits[k][row] is the full vocabulary row of step k. last_hidden_state: [row][pos][d_model] flattened, "
        "padding positions included (their values are not meaningful; compare where attention_mask is 1). "
        "Values rounded to 7 significant digits. onnxruntime reproduced these (onnxruntime_max_abs_diff) with the split "
        "layout, and with the merged one fed use_cache_branch=false and zero-length past_key_values.* at step 0.",
        "texts": GOLDEN_TEXTS,
        "input_ids": input_ids.tolist(),
        "attention_mask": attention_mask.tolist(),
        "decoder_input_ids": decoder_ids.tolist(),
        "shape": {"batch": int(input_ids.shape[0]), "source_len": int(input_ids.shape[1]), "d_model": model.config.d_model, "vocab": vocab},
        "last_hidden_state": rounded(enc_t),
        "last_hidden_state_sum_where_mask": float(np.sum(enc_t * attention_mask.numpy()[:, :, None])),
        "logits": [[rounded(row) for row in step] for step in steps],
        "argmax": [[int(np.argmax(row)) for row in step] for step in steps],
        "tolerance": 1e-4,
        "onnxruntime_max_abs_diff": worst,
        "versions": t5.versions(),
    }
    (FIXTURES / "logits_golden.json").write_text(json.dumps(golden, separators=(",", ":")) + "\n")
    for d in ("tiny-split", "tiny-merged"):
        for f in sorted((FIXTURES / d).iterdir()):
            print(f"{f.relative_to(ROOT)}: {f.stat().st_size} bytes, sha256 {hashlib.sha256(f.read_bytes()).hexdigest()[:16]}", file=sys.stderr)


if __name__ == "__main__":
    main()
