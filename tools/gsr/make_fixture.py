#!/usr/bin/env python3
"""The generative retriever's test fixtures: a T5-style tokenizer, a randomly initialised T5
exported to ONNX in both optimum layouts (schema/gsr-decoding.md §1), and PyTorch's logits for the Rust
runtime to match.

    PY=$(tools/gsr/venv.sh)
    $PY tools/gsr/make_fixture.py                 # tests/fixtures/gsr/{tiny-split,tiny-merged,logits_golden.json}
    $PY tools/gsr/make_fixture.py --shape t5-small --out ~/.cache/trellis/models/t5-small-random

Deterministic: fixed seeds, one thread. The weights are random: the model's outputs mean
nothing, only that Rust computes what PyTorch computes. Every export is checked here against
PyTorch (encoder + 5 cached decoder steps) with onnxruntime before anything is written.
"""
import argparse
import csv
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

# optimum's decoder merge walks Python sets of initializer names: fix string hashing so the
# merged file is byte-identical across runs (re-exec once with the seed set).
if __name__ == "__main__" and os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

# Before the libraries start their thread pools: one thread keeps training and export reproducible.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_KG = ROOT / "tests/fixtures/opendialkg-sample.tsv"
TRAIN_DIALOGS = Path("/work/shared/data/opendialkg/dialogs_train.csv")
FIXTURES = ROOT / "tests/fixtures/gsr"
BENCH_TOKENIZER = Path.home() / ".cache/trellis/bench/t5-unigram-32k-opendialkg.json"

# ---------------------------------------------------------------------------------------
# Linearization presets, as src/linearize.rs defines them (independent re-statement).


def preset(name):
    if name == "trellis":
        return {
            "head": ["[Head]"],
            "int": [[f"[Int{n}]"] for n in range(1, 5)],
            "rev": [[f"[Rev{n}]"] for n in range(1, 5)],
            "tail": ["[Tail]"],
            "sep": ["[SEP]"],
        }
    if name == "dialoggsr":
        return {
            "head": ["[HEAD]"],
            "int": [[f"[Int{n}_1]", f"[Int{n}_2]"] for n in range(1, 5)],
            "rev": [[f"[Rev{n}_1]", f"[Rev{n}_2]"] for n in range(1, 5)],
            "tail": ["[TAIL]"],
            "sep": ["[SEP]"],
        }
    raise ValueError(name)


# Both presets' boundary tokens, in the order of tools/train_tokenizer.py (the trellis
# preset's first, so their ids match the older fixture's layout), then the authors' 18.
ADDED_TOKENS = (
    ["[Head]", "[Int1]", "[Int2]", "[Int3]", "[Int4]", "[Rev1]", "[Rev2]", "[Tail]", "[SEP]", "[Rev3]", "[Rev4]", "[HEAD]"]
    + [f"[{kind}{n}_{j}]" for kind in ("Int", "Rev") for n in range(1, 5) for j in (1, 2)]
    + ["[TAIL]"]
)


def entity_text(name):
    """`Linearization::entity_text` with `lowercase: true` (Rust `str::to_lowercase`)."""
    return name.lower()


def relation_text(name):
    """`Linearization::relation_text`: lowercased, `_` and `-` written as spaces."""
    return "".join(" " if c in "_-" else c for c in entity_text(name))


def render_path(lin, start, hops):
    """`Linearization::render_path`; hops are (relation, reversed, to)."""
    out = f"{''.join(lin['head'])} {entity_text(start)}"
    for i, (rel, rev, to) in enumerate(hops):
        pair = lin["rev"] if rev else lin["int"]
        out += f" {''.join(pair[2 * i])} {relation_text(rel)} {''.join(pair[2 * i + 1])} {entity_text(to)}"
    return out + f" {''.join(lin['tail'])}"


def slots(lin, side):
    """`Linearization::slots`: the (open, close) boundaries around a name of `side`; the first
    is where the token index encodes names."""
    h, i, r, t = lin["head"], lin["int"], lin["rev"], lin["tail"]
    if side == "relation":
        return [(i[0], i[1]), (r[0], r[1]), (i[2], i[3]), (r[2], r[3])]
    out = [(h, i[0]), (h, r[0])]
    for first in (i[1], r[1]):
        for close in (t, i[2], r[2]):
            out.append((first, close))
    out += [(i[3], t), (r[3], t)]
    return out


def between(ids, open_ids, close_ids):
    """The ids strictly between the first `open_ids` and the next `close_ids` (tokenizer.rs)."""
    n = len(open_ids)
    start = next(k for k in range(len(ids)) if ids[k : k + n] == open_ids) + n
    m = len(close_ids)
    end = next(k for k in range(start, len(ids)) if ids[k : k + m] == close_ids)
    return ids[start:end]


def name_ids(tok, lin, side, name, slot=0):
    """A name's ids as the token index computes them: encoded inside its slot."""
    open_b, close_b = slots(lin, side)[slot]
    text_fn = entity_text if side == "entity" else relation_text
    enc = tok.encode(f"{''.join(open_b)} {text_fn(name)} {''.join(close_b)}", add_special_tokens=False).ids
    return between(enc, [tok.token_to_id(t) for t in open_b], [tok.token_to_id(t) for t in close_b])


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


def check_tokenizer(tok, facts):
    """What the Rust side relies on: special ids, boundaries as single tokens, names whose ids
    do not depend on their slot (both presets, every name of the sample), full path text =
    boundaries + names, and lowercasing that needs no context."""
    assert [tok.token_to_id(t) for t in ("<pad>", "</s>", "<unk>")] == [0, 1, 2]
    assert tok.encode("a b").ids[-1] == 1, "the post-processor appends </s>"
    for t in ADDED_TOKENS:
        assert tok.token_to_id(t) is not None and tok.encode(t, add_special_tokens=False).ids == [tok.token_to_id(t)], t
    entities = sorted({e for s, _, o in facts for e in (s, o)})
    relations = sorted({r for _, r, _ in facts})
    for name in entities + relations:
        # Rust lowercases per char except Greek final sigma, as Python does; a name whose
        # lowercase depends on context anywhere else would be a portability risk: refuse it.
        per_char = "".join(c.lower() for c in name)
        assert name.lower() == per_char or "\u03a3" in name, f"context-dependent lowercase: {name!r}"
        assert tok.encode(entity_text(name), add_special_tokens=False).ids, name
    for lname in ("trellis", "dialoggsr"):
        lin = preset(lname)
        for side, names in (("entity", entities), ("relation", relations)):
            for name in names:
                first = name_ids(tok, lin, side, name, 0)
                assert first, f"{name!r} has no ids"
                for k in range(1, len(slots(lin, side))):
                    other = name_ids(tok, lin, side, name, k)
                    assert other == first, f"{lname}: {side} {name!r}: {first} in slot 0 but {other} in slot {k}"
        # A whole path's ids are its boundaries' and names' ids, one after the other.
        for s, r, o in facts[:200]:
            for rev in (False, True):
                start, to = (o, s) if rev else (s, o)
                text = render_path(lin, start, [(r, rev, to)])
                ids = tok.encode(text, add_special_tokens=False).ids
                b = lin["rev"] if rev else lin["int"]
                tid = lambda ts: [tok.token_to_id(t) for t in ts]  # noqa: E731
                want = (
                    tid(lin["head"]) + name_ids(tok, lin, "entity", start) + tid(b[0]) + name_ids(tok, lin, "relation", r) + tid(b[1])
                    + name_ids(tok, lin, "entity", to) + tid(lin["tail"])
                )
                assert ids == want, f"{text!r}: {ids} != {want}"


# ---------------------------------------------------------------------------------------
# Model and export.

SHAPES = {
    # Small enough to commit (a few hundred KB per ONNX file), big enough to have every part.
    "tiny": dict(d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=2, num_decoder_layers=2, relative_attention_num_buckets=8, relative_attention_max_distance=32),
    "t5-small": dict(d_model=512, d_kv=64, num_heads=8, d_ff=2048, num_layers=6, num_decoder_layers=6, relative_attention_num_buckets=32, relative_attention_max_distance=128),
}


def make_model(shape, vocab_size, seed):
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(
        vocab_size=vocab_size,
        dropout_rate=0.0,
        feed_forward_proj="relu",
        tie_word_embeddings=True,
        decoder_start_token_id=0,
        eos_token_id=1,
        pad_token_id=0,
        is_encoder_decoder=True,
        **SHAPES[shape],
    )
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(cfg).eval()
    return model


def export(model_dir, out_dir, merged):
    """optimum-onnx's exporter on the saved model: split layout without post-processing,
    merged (the `If` on `use_cache_branch`) with it."""
    from optimum.exporters.onnx import main_export

    main_export(
        str(model_dir),
        output=str(out_dir),
        task="text2text-generation-with-past",
        no_post_process=not merged,
        do_validation=False,
        local_files_only=True,
        library_name="transformers",
    )
    for f in list(Path(out_dir).iterdir()):
        keep = {"encoder_model.onnx"} | ({"decoder_model_merged.onnx"} if merged else {"decoder_model.onnx", "decoder_with_past_model.onnx"})
        if f.name not in keep:
            f.unlink() if f.is_file() else shutil.rmtree(f)
    assert {f.name for f in Path(out_dir).iterdir()} == keep, sorted(f.name for f in Path(out_dir).iterdir())


def torch_reference(model, input_ids, attention_mask, decoder_ids):
    """Encoder output and the logits of each cached decoder step (step k reads decoder_ids[:, k])."""
    with torch.no_grad():
        enc = model.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        past = None
        steps = []
        for k in range(decoder_ids.shape[1]):
            out = model(
                encoder_outputs=(enc,),
                attention_mask=attention_mask,
                decoder_input_ids=decoder_ids[:, k : k + 1],
                past_key_values=past,
                use_cache=True,
            )
            past = out.past_key_values
            steps.append(out.logits[:, 0, :].numpy())
    return enc.numpy(), steps


def ort_run(onnx_dir, merged, cfg, input_ids, attention_mask, decoder_ids):
    """The same with onnxruntime, as the Rust runtime will run it."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = lambda name: ort.InferenceSession(str(Path(onnx_dir) / name), so, providers=["CPUExecutionProvider"])  # noqa: E731
    enc_s = sess("encoder_model.onnx")
    ids, mask = input_ids.numpy().astype(np.int64), attention_mask.numpy().astype(np.int64)
    hidden = enc_s.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]
    layers, heads, dkv = cfg.num_decoder_layers, cfg.num_heads, cfg.d_kv
    b = ids.shape[0]
    if merged:
        dec = sess("decoder_model_merged.onnx")
        first = dec
    else:
        first, dec = sess("decoder_model.onnx"), sess("decoder_with_past_model.onnx")
    past = {}
    steps = []
    for k in range(decoder_ids.shape[1]):
        s = first if k == 0 else dec
        names = [i.name for i in s.get_inputs()]
        feed = {"input_ids": decoder_ids[:, k : k + 1].numpy().astype(np.int64), "encoder_attention_mask": mask}
        if "encoder_hidden_states" in names:
            feed["encoder_hidden_states"] = hidden
        if merged:
            feed["use_cache_branch"] = np.array([k > 0])
        for i in range(layers):
            for kind in ("decoder", "encoder"):
                for kv in ("key", "value"):
                    n = f"past_key_values.{i}.{kind}.{kv}"
                    if n in names:
                        feed[n] = past.get(n, np.zeros((b, heads, 0, dkv), np.float32))
        outs = s.run(None, feed)
        out_names = [o.name for o in s.get_outputs()]
        res = dict(zip(out_names, outs))
        steps.append(res["logits"][:, -1, :])
        for n, v in res.items():
            if n.startswith("present."):
                pn = "past_key_values." + n[len("present.") :]
                # The with-past decoder re-emits nothing useful for the encoder K/V: keep the first.
                if ".encoder." in n and pn in past:
                    continue
                past[pn] = v
    return hidden, steps


def verify(onnx_dir, merged, model, input_ids, attention_mask, decoder_ids, tol=1e-4):
    enc_t, steps_t = torch_reference(model, input_ids, attention_mask, decoder_ids)
    enc_o, steps_o = ort_run(onnx_dir, merged, model.config, input_ids, attention_mask, decoder_ids)
    m = attention_mask.numpy()[:, :, None].astype(bool)
    worst = float(np.max(np.abs(np.where(m, enc_t - enc_o, 0))))
    for a, b in zip(steps_t, steps_o):
        worst = max(worst, float(np.max(np.abs(a - b))))
    assert worst < tol, f"{onnx_dir}: onnxruntime differs from PyTorch by {worst}"
    return worst


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
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    ap.add_argument("--out", type=Path, help="model directory (t5-small shape: split layout only, nothing else written)")
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--dialogs", type=int, default=1500, help="training dialogs whose text the tiny tokenizer learns from")
    ap.add_argument("--retrain-tokenizer", action="store_true", help="train the tiny tokenizer anew instead of reading the committed one")
    args = ap.parse_args()
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
                f"make_fixture: {BENCH_TOKENIZER} is missing: the t5-small shape uses the 32k "
                "tokenizer that `cargo bench --bench decode_index` trains and writes there; run it first"
            )
        tok = Tokenizer.from_file(str(BENCH_TOKENIZER))
        tok = finish_tokenizer(tok)
    check_tokenizer(tok, facts)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    model = make_model(args.shape, vocab, args.seed)
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
            export(tmp / "hf", onnx_dir, merged)
            worst["merged" if merged else "split"] = verify(onnx_dir, merged, model, input_ids, attention_mask, decoder_ids)
        print(f"onnxruntime vs PyTorch, largest difference: {worst}", file=sys.stderr)

        if args.shape != "tiny":
            out = args.out or Path.home() / ".cache/trellis/models/t5-small-random"
            write_model_dir(out, model, tok, tmp / "split")
            # The PyTorch weights too (not part of the model directory format, ignored by
            # Trellis): tools/gsr/bench_reference.py runs the Python reference from them.
            model.save_pretrained(out)
            print(f"{out}: written", file=sys.stderr)
            return
        FIXTURES.mkdir(parents=True, exist_ok=True)
        for merged in (False, True):
            out = FIXTURES / ("tiny-merged" if merged else "tiny-split")
            shutil.rmtree(out, ignore_errors=True)
            write_model_dir(out, model, tok, tmp / ("merged" if merged else "split"))

    enc_t, steps = torch_reference(model, input_ids, attention_mask, decoder_ids)
    golden = {
        "about": "PyTorch outputs of tests/fixtures/gsr/tiny-*/ (tools/gsr/make_fixture.py). input_ids/attention_mask: "
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
        "versions": versions(),
    }
    (FIXTURES / "logits_golden.json").write_text(json.dumps(golden, separators=(",", ":")) + "\n")
    for d in ("tiny-split", "tiny-merged"):
        for f in sorted((FIXTURES / d).iterdir()):
            print(f"{f.relative_to(ROOT)}: {f.stat().st_size} bytes, sha256 {hashlib.sha256(f.read_bytes()).hexdigest()[:16]}", file=sys.stderr)


def versions():
    import onnx
    import onnxruntime
    import tokenizers
    import transformers

    try:
        from importlib.metadata import version

        opt = version("optimum-onnx")
    except Exception:  # noqa: BLE001
        opt = None
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "optimum-onnx": opt,
        "python": sys.version.split()[0],
    }


if __name__ == "__main__":
    main()
