#!/usr/bin/env python3
"""The encoder runtime's test fixtures (issue 23): tiny random sentence-transformers models
(three bi-encoders and one cross-encoder) exported to ONNX as a user would, and the outputs of
the reference packages on them for the Rust runtime to match.

    PY=$(bash tools/venv.sh encoders)
    $PY tools/reference/encoder_fixtures.py --out tests/fixtures/encoders [--force]

Writes, under --out: `bert-mean`, `bert-cls`, `t5-mean` (bi-encoders) and `cross` (a
cross-encoder), each an optimum ONNX export (model.onnx, config.json, the tokenizer files)
with the sentence-transformers files that say pooling and normalization and a trellis.json;
and goldens.json: sentence-transformers' `encode` of a dozen texts per bi-encoder, the raw
logits (transformers) and `CrossEncoder.predict`'s scores of ten pairs, and the token ids of
every input. tests/fixtures/encoders/README.md describes the files.

Everything is made here from nothing (no download): the tokenizers are trained on the names
of tests/fixtures/opendialkg-sample.tsv, the weights drawn after fixed seeds, one thread. The
weights are random: the outputs mean nothing, only that Rust computes what the reference
packages compute. Before anything is written, every model.onnx is run with onnxruntime (the
pooling in numpy, as the Rust runtime does it) and compared with the goldens (1e-5).

The committed fixtures are frozen: without --force the script refuses to write over them.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

# Before the libraries start their thread pools: one thread keeps training and export reproducible.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_KG = ROOT / "tests/fixtures/opendialkg-sample.tsv"
SEED = 23
TOL = 1e-5

# Every model: hidden 32, 2 layers, 2 heads, feed-forward 64 (a few hundred KB of ONNX).
BERT_SHAPE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64, type_vocab_size=2, initializer_range=0.1)
T5_SHAPE = dict(d_model=32, d_kv=16, num_heads=2, d_ff=64, num_layers=2, relative_attention_num_buckets=8, relative_attention_max_distance=32, feed_forward_proj="relu", dropout_rate=0.0)
BI_MAX_LENGTH = 24
CROSS_MAX_LENGTH = 32

BI_ENCODERS = {
    # name: (architecture, pooling, normalize)
    "bert-mean": ("bert", "mean", True),
    "bert-cls": ("bert", "cls", False),
    "t5-mean": ("t5", "mean", False),
}

TEXTS = [
    "Tom Hanks",
    "who directed 13 Going on 30?",
    "The Shawshank Redemption starred Morgan Freeman and Tim Robbins.",
    # Longer than 24 tokens: truncated at max_seq_length.
    "I really liked Catch Me If You Can, which starred Leonardo DiCaprio and Tom Hanks, was directed by Steven Spielberg in 2002 and had music by John Williams",
    "",
    "Café Müller – Pina Bausch’s ballet",
    "BEYONCÉ and JAY-Z",
    "tHe MaTrIx ReLoAdEd",
    "naïve façade résumé ångström",
    "東京 Tokyo 2020 😀",
    "music_by Theodore Shapiro",
    "Thriller, Romantic comedy, Drama, Horror, Science Fiction, Crime Fiction, Action, Adventure, Animation, Documentary, Fantasy, Mystery",
]

PAIRS = [
    ("who starred in 13 Going on 30?", "13 Going on 30 starred Marcia DeBonis"),
    ("who starred in 13 Going on 30?", "127 Hours has genre Thriller"),
    ("music of 13 Going on 30", "Theodore Shapiro wrote the music"),
    ("", "an empty query"),
    ("an empty passage", ""),
    ("Café Müller", "Pina Bausch’s ballet, naïve and résumé"),
    # Longer than 32 tokens together: longest_first truncation cuts the passage first, then both.
    ("who directed Catch Me If You Can?", "Catch Me If You Can was directed by Steven Spielberg in 2002, starred Leonardo DiCaprio and Tom Hanks, had music by John Williams and was produced by DreamWorks Pictures in the United States"),
    ("I am looking for a romantic comedy or a thriller or a science fiction film with Tom Hanks or Meg Ryan, something from the nineties", "Sleepless in Seattle is a romantic comedy starring Tom Hanks and Meg Ryan, released in 1993 and directed by Nora Ephron"),
    ("TOM HANKS", "tom hanks"),
    ("東京 2020", "Tokyo 😀"),
]


# ---------------------------------------------------------------------------------------
# Tokenizers.


def corpus(path=SAMPLE_KG):
    """The sample's entity names and relation names (`_`, `-` as spaces), sorted, once each."""
    names = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 3:
                continue
            s, r, o = cols
            names.update([s, o, r.lstrip("~").replace("_", " ").replace("-", " ")])
    return sorted(names)


# The vocabularies are chosen here rather than by tokenizers' trainers: those break ties in
# hash-map order, so two runs gave two vocabularies. Candidates are ranked by count x (length - 1)
# (the characters a piece saves), ties by the piece itself.
VOCAB_SIZE = 400


def words_of(tok, texts):
    """The pre-tokens the tokenizer's own normalizer and pre-tokenizer make of `texts`, counted."""
    counts = {}
    for t in texts:
        for w, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(t)):
            counts[w] = counts.get(w, 0) + 1
    return counts


def ranked(counts, size):
    return [p for p, _ in sorted(counts.items(), key=lambda kv: (-kv[1] * (len(kv[0]) - 1), kv[0]))][:size]


def bert_tokenizer(texts):
    """BERT-uncased's pipeline (lowercase, accents stripped, CJK characters split), WordPiece with
    ##-continuations, [PAD] [UNK] [CLS] [SEP] [MASK] as ids 0-4, [CLS] A [SEP] (B [SEP]) with
    type ids 0 then 1. The vocabulary: the specials, every character alone and as ##c, then
    whole-word prefixes and ##-continuations of the corpus."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(vocab={"[UNK]": 0}, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    words = words_of(tok, texts)
    chars = sorted({c for w in words for c in w})
    pieces = {}
    for w, n in words.items():
        for i in range(len(w)):
            for j in range(i + 2, min(len(w), i + 8) + 1):
                p = w[i:j] if i == 0 else "##" + w[i:j]
                pieces[p] = pieces.get(p, 0) + n
    vocab = specials + chars + ["##" + c for c in chars]
    vocab += ranked({p: n for p, n in pieces.items() if p not in vocab}, VOCAB_SIZE - len(vocab))
    tok.model = models.WordPiece(vocab={t: i for i, t in enumerate(vocab)}, unk_token="[UNK]", max_input_chars_per_word=100)
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.add_special_tokens(specials)
    assert [tok.token_to_id(t) for t in specials] == [0, 1, 2, 3, 4] and tok.get_vocab_size() == VOCAB_SIZE
    return tok


def t5_tokenizer(texts):
    """T5's conventions: a SentencePiece-style Unigram with the \u2581 metaspace, case kept, <pad>
    </s> <unk> as ids 0-2 (score 0, as in T5's tokenizer.json), `</s>` appended (A </s> B </s>
    for pairs), no type ids. NFKC stands in for T5's precompiled SentencePiece normalizer. The
    pieces: every character, then the corpus's substrings, scored log(count / total)."""
    tok = Tokenizer(models.Unigram([("<unk>", 0.0)], unk_id=0, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    words = words_of(tok, texts)
    singles, pieces = {}, {}
    for w, n in words.items():
        for i in range(len(w)):
            singles[w[i]] = singles.get(w[i], 0) + n
            for j in range(i + 2, min(len(w), i + 8) + 1):
                pieces[w[i:j]] = pieces.get(w[i:j], 0) + n
    specials = ["<pad>", "</s>", "<unk>"]
    chosen = sorted(singles) + ranked(pieces, VOCAB_SIZE - len(specials) - len(singles))
    counts = singles | pieces
    total = float(sum(counts[p] for p in chosen))
    scored = sorted(((p, float(np.log(counts[p] / total))) for p in chosen), key=lambda ps: (-ps[1], ps[0]))
    tok.model = models.Unigram([(t, 0.0) for t in specials] + scored, unk_id=2, byte_fallback=False)
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(single="$A:0 </s>:0", pair="$A:0 </s>:0 $B:0 </s>:0", special_tokens=[("</s>", 1)])
    tok.add_special_tokens(specials)
    assert [tok.token_to_id(t) for t in specials] == [0, 1, 2] and tok.get_vocab_size() == VOCAB_SIZE
    return tok


def hf_tokenizer(arch, tok, model_max_length):
    """The transformers wrapper a real checkpoint has (tokenizer_config.json and friends)."""
    if arch == "bert":
        from transformers import BertTokenizerFast

        return BertTokenizerFast(tokenizer_object=tok, do_lower_case=True, strip_accents=None, tokenize_chinese_chars=True, unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]", model_max_length=model_max_length)
    from transformers import T5TokenizerFast

    # extra_ids=0: no <extra_id_N> sentinels (span corruption only; an encoder never sees them).
    return T5TokenizerFast(tokenizer_object=tok, eos_token="</s>", unk_token="<unk>", pad_token="<pad>", extra_ids=0, model_max_length=model_max_length)


# ---------------------------------------------------------------------------------------
# Models.


def build_hf(arch, tok, seed, out, cross=False):
    """A seeded random transformers checkpoint with its tokenizer, saved to `out`."""
    from transformers import BertConfig, BertForSequenceClassification, BertModel, T5Config, T5EncoderModel

    vocab = tok.get_vocab_size()
    torch.manual_seed(seed)
    if arch == "bert":
        cfg = BertConfig(vocab_size=vocab, pad_token_id=0, num_labels=1, **BERT_SHAPE)
        model = BertForSequenceClassification(cfg) if cross else BertModel(cfg)
    else:
        cfg = T5Config(vocab_size=vocab, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, is_encoder_decoder=False, use_cache=False, **T5_SHAPE)
        model = T5EncoderModel(cfg)
    model.eval()
    model.save_pretrained(out)
    hf_tokenizer(arch, tok, CROSS_MAX_LENGTH if cross else BERT_SHAPE["max_position_embeddings"]).save_pretrained(out)


def build_bi_encoder(hf_dir, pooling, normalize, out):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling
    from sentence_transformers.base.modules import Transformer

    tr = Transformer(str(hf_dir), max_seq_length=BI_MAX_LENGTH)
    mods = [tr, Pooling(tr.get_embedding_dimension(), pooling_mode=pooling)]
    if normalize:
        mods.append(Normalize())
    SentenceTransformer(modules=mods, device="cpu").save(str(out))


def build_cross_encoder(hf_dir, out):
    from sentence_transformers import CrossEncoder

    CrossEncoder(str(hf_dir), num_labels=1, max_length=CROSS_MAX_LENGTH, device="cpu").save(str(out))


# ---------------------------------------------------------------------------------------
# Export.


def export_optimum(src, out, task):
    """optimum's exporter on the saved model, as `optimum-cli export onnx --task TASK
    --library-name transformers` does (the transformers library named: left to itself optimum
    sees modules.json and exports sentence-transformers' pooled outputs instead)."""
    from optimum.exporters.onnx import main_export

    main_export(str(src), output=str(out), task=task, library_name="transformers", do_validation=False, local_files_only=True, device="cpu")


def export_t5_encoder(src, out):
    """optimum has no task that exports a T5EncoderModel checkpoint alone (feature-extraction
    on t5 is the encoder-decoder T5Model), so torch.onnx.export with optimum's names: inputs
    input_ids, attention_mask; output last_hidden_state; batch and sequence axes dynamic. The
    tokenizer and config files are copied as optimum copies them."""
    from transformers import T5EncoderModel

    model = T5EncoderModel.from_pretrained(str(src)).eval()
    model.config.use_cache = False

    class Wrapped(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    ids = torch.ones((2, 7), dtype=torch.int64)
    mask = torch.ones((2, 7), dtype=torch.int64)
    out.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(
        Wrapped(model),
        (ids, mask),
        str(out / "model.onnx"),
        input_names=["input_ids", "attention_mask"],
        output_names=["last_hidden_state"],
        dynamic_axes={"input_ids": {0: "batch_size", 1: "sequence_length"}, "attention_mask": {0: "batch_size", 1: "sequence_length"}, "last_hidden_state": {0: "batch_size", 1: "sequence_length"}},
        opset_version=17,
        dynamo=False,
    )
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / name).exists():
            shutil.copy(src / name, out / name)


ST_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json", "1_Pooling/config.json")


def copy_st_files(st_dir, out):
    for name in ST_FILES:
        if (st_dir / name).exists():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(st_dir / name, out / name)


# ---------------------------------------------------------------------------------------
# References and checks.


def ort_session(path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def io_signature(sess):
    f = lambda xs: [{"name": x.name, "type": x.type, "shape": x.shape} for x in xs]  # noqa: E731
    return {"inputs": f(sess.get_inputs()), "outputs": f(sess.get_outputs())}


def pad(rows, value=0):
    n = max(len(r) for r in rows)
    return np.array([r + [value] * (n - len(r)) for r in rows], dtype=np.int64)


def ort_bi_encode(model_dir, pooling, normalize, max_length, texts, batch):
    """What the Rust runtime does: tokenizer.json with truncation, right padding, model.onnx,
    pooling and normalization in numpy. Returns the embeddings and the token ids."""
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length)
    encs = [tok.encode(t) for t in texts]
    sess = ort_session(model_dir / "model.onnx")
    names = [i.name for i in sess.get_inputs()]
    out = []
    for i in range(0, len(encs), batch):
        chunk = encs[i : i + batch]
        feed = {"input_ids": pad([e.ids for e in chunk]), "attention_mask": pad([e.attention_mask for e in chunk])}
        if "token_type_ids" in names:
            feed["token_type_ids"] = pad([e.type_ids for e in chunk])
        hidden = sess.run(["last_hidden_state"], feed)[0].astype(np.float64)
        mask = feed["attention_mask"][:, :, None].astype(np.float64)
        if pooling == "mean":
            v = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)
        else:
            v = hidden[:, 0]
        if normalize:
            v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        out.append(v)
    return np.concatenate(out), [e.ids for e in encs]


def st_token_ids(st, text):
    f = st.tokenize([text])
    return {k: v[0].tolist() for k, v in f.items() if k in ("input_ids", "token_type_ids", "attention_mask")}


def versions():
    from importlib.metadata import version

    return {p: version(p) for p in ("sentence-transformers", "transformers", "torch", "tokenizers", "optimum", "optimum-onnx", "onnx", "onnxruntime")} | {"python": sys.version.split()[0]}


def floats(a):
    return [[float(x) for x in row] for row in np.asarray(a, dtype=np.float32)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests/fixtures/encoders")
    ap.add_argument("--force", action="store_true", help="rewrite the frozen fixtures")
    args = ap.parse_args()
    names = list(BI_ENCODERS) + ["cross", "goldens.json"]
    there = [str(args.out / n) for n in names if (args.out / n).exists()]
    if there and not args.force:
        raise SystemExit(f"encoder_fixtures.py: {', '.join(there)} exist(s): frozen fixtures (the tests were made with them); --force rewrites them")
    torch.set_num_threads(1)

    from sentence_transformers import CrossEncoder, SentenceTransformer
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    texts = corpus()
    toks = {"bert": bert_tokenizer(texts), "t5": t5_tokenizer(texts)}
    goldens = {"texts": TEXTS, "bi_encoders": {}, "cross": {}, "versions": versions()}
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        stage = tmp / "out"
        stage.mkdir()
        for k, (name, (arch, pooling, normalize)) in enumerate(BI_ENCODERS.items()):
            hf, st_dir, dst = tmp / f"{name}-hf", tmp / f"{name}-st", stage / name
            build_hf(arch, toks[arch], SEED + k, hf)
            build_bi_encoder(hf, pooling, normalize, st_dir)
            st = SentenceTransformer(str(st_dir), device="cpu")
            emb = st.encode(TEXTS, batch_size=4, convert_to_numpy=True)
            ids = [st_token_ids(st, t) for t in TEXTS]
            if arch == "bert":
                export_optimum(st_dir, dst, "feature-extraction")
            else:
                export_t5_encoder(st_dir, dst)
            copy_st_files(st_dir, dst)
            (dst / "trellis.json").write_text(json.dumps({"format": 1, "task": "dense", "dense": {"pooling": pooling, "normalize": normalize, "max_length": BI_MAX_LENGTH}}, indent=2) + "\n")
            # The check: onnxruntime + numpy pooling, in batches of 4 (padding) and one at a time.
            worst = 0.0
            for batch in (4, 1):
                got, rust_ids = ort_bi_encode(dst, pooling, normalize, BI_MAX_LENGTH, TEXTS, batch)
                assert rust_ids == [x["input_ids"] for x in ids], f"{name}: tokenizer.json gives other ids than sentence-transformers"
                worst = max(worst, float(np.max(np.abs(got - emb))))
            assert worst < TOL, f"{name}: onnxruntime differs from sentence-transformers by {worst}"
            report[name] = {"max_abs_diff": worst, **io_signature(ort_session(dst / "model.onnx"))}
            goldens["bi_encoders"][name] = {
                "dir": name,
                "pooling": pooling,
                "normalize": normalize,
                "max_length": BI_MAX_LENGTH,
                "dimension": int(emb.shape[1]),
                "input_ids": [x["input_ids"] for x in ids],
                "embeddings": floats(emb),
                "ort_max_abs_diff": worst,
            }

        # Cross-encoder.
        hf, st_dir, dst = tmp / "cross-hf", tmp / "cross-st", stage / "cross"
        build_hf("bert", toks["bert"], SEED + 10, hf, cross=True)
        build_cross_encoder(hf, st_dir)
        ce = CrossEncoder(str(st_dir), device="cpu")
        scores = ce.predict(PAIRS, batch_size=4, convert_to_numpy=True)
        activation = type(ce.activation_fn).__name__
        tk = AutoTokenizer.from_pretrained(str(st_dir))
        clf = AutoModelForSequenceClassification.from_pretrained(str(st_dir)).eval()
        logits, enc_ids, enc_types = [], [], []
        with torch.no_grad():
            for q, p in PAIRS:
                # The pair as lists: transformers' one-pair call tk(q, "") takes the empty passage
                # for no passage ([CLS] q [SEP]), where the list form, the tokenizers library
                # and CrossEncoder.predict give [CLS] q [SEP] [SEP]; the goldens follow the latter.
                enc = tk([q], [p], truncation="longest_first", max_length=CROSS_MAX_LENGTH, return_tensors="pt")
                logits.append(float(clf(**enc).logits[0, 0]))
                enc_ids.append(enc["input_ids"][0].tolist())
                enc_types.append(enc["token_type_ids"][0].tolist())
            single = {}
            for k, (q, p) in enumerate(PAIRS):
                enc = tk(q, p, truncation="longest_first", max_length=CROSS_MAX_LENGTH, return_tensors="pt")
                if enc["input_ids"][0].tolist() != enc_ids[k]:
                    single[str(k)] = {"input_ids": enc["input_ids"][0].tolist(), "logit": float(np.float32(clf(**enc).logits[0, 0]))}
        logits = np.array(logits)
        # predict's scores are the activation of the same logits.
        assert np.max(np.abs(torch.sigmoid(torch.tensor(logits)).numpy() - scores)) < 1e-6 and activation == "Sigmoid", activation
        export_optimum(st_dir, dst, "text-classification")
        copy_st_files(st_dir, dst)
        (dst / "trellis.json").write_text(json.dumps({"format": 1, "task": "rerank", "rerank": {"max_length": CROSS_MAX_LENGTH}}, indent=2) + "\n")
        tok = Tokenizer.from_file(str(dst / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(CROSS_MAX_LENGTH, strategy="longest_first")
        encs = [tok.encode(q, p) for q, p in PAIRS]
        assert [e.ids for e in encs] == enc_ids and [e.type_ids for e in encs] == enc_types, "cross: tokenizer.json gives other ids than transformers"
        sess = ort_session(dst / "model.onnx")
        worst = 0.0
        for batch in (4, 1):
            got = []
            for i in range(0, len(encs), batch):
                c = encs[i : i + batch]
                feed = {"input_ids": pad([e.ids for e in c]), "attention_mask": pad([e.attention_mask for e in c]), "token_type_ids": pad([e.type_ids for e in c])}
                got.extend(sess.run(["logits"], feed)[0][:, 0].tolist())
            worst = max(worst, float(np.max(np.abs(np.array(got) - logits))))
        assert worst < TOL, f"cross: onnxruntime differs from transformers by {worst}"
        report["cross"] = {"max_abs_diff": worst, **io_signature(sess)}
        goldens["cross"] = {
            "dir": "cross",
            "max_length": CROSS_MAX_LENGTH,
            "truncation": "longest_first",
            "activation": "sigmoid",
            "pairs": [list(p) for p in PAIRS],
            "input_ids": enc_ids,
            "token_type_ids": enc_types,
            "logits": [float(np.float32(x)) for x in logits],
            "scores": [float(x) for x in np.asarray(scores, dtype=np.float32)],
            "ort_max_abs_diff": worst,
            "transformers_one_pair_call_differs": single,  # pair index: what tk(q, p) gives instead
        }
        goldens["onnx_io"] = {k: {kk: vv for kk, vv in v.items() if kk != "max_abs_diff"} for k, v in report.items()}
        (stage / "goldens.json").write_text(json.dumps(goldens, indent=1, ensure_ascii=False) + "\n")

        args.out.mkdir(parents=True, exist_ok=True)
        for n in names:
            target = args.out / n
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            shutil.move(str(stage / n), str(target))
    for k, v in report.items():
        print(f"{k}: onnxruntime vs reference max |diff| {v['max_abs_diff']:.3g}")
        for io in ("inputs", "outputs"):
            print("   ", io, ", ".join(f"{x['name']} {x['type']} {x['shape']}" for x in v[io]))
    total = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    print(f"{args.out}: {total / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
