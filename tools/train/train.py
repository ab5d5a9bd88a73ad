#!/usr/bin/env python3
"""Trains the generative retriever (a small T5 from scratch) in two stages, as DialogGSR
section 3.4 does:

1. `recon`: knowledge-graph reconstruction. A 1- or 2-hop path of the training KG is written
   as the linearization writes it, one entity or relation replaced by [MASK]; the model
   writes the whole path back. Teaches the boundary tokens, the names and which relations
   go with which entities.
2. `retrieval`: input the dialog history with the linked entities marked, target the gold
   path of the turn, both exactly as Trellis makes them (`trellis targets` exports the input
   ids, the target ids and the constraint's allowed sets along the gold path). The loss is the
   likelihood over the vocabulary plus `--constrained-weight` times the likelihood normalized
   over the tokens the constraint allows at each step: the decisions the decoder really makes.
   After every epoch the model is exported and Trellis itself computes dev path@k; the best
   epoch is kept.
3. `generator`: the response generator (DialogGSR's second model, same tokenizer and shape,
   initialised from the `recon` stage): input the knowledge paths and the history as the
   runtime encodes them, target the reply (`trellis targets --model GEN_SPEC` with a
   generator's trellis.json exports both as ids). Teacher-forced likelihood; after every
   epoch the mean token cross-entropy on dev targets, the best epoch exported (export.py,
   tools/train/generator.json) and named in `generator/best.json`.

    PY=$(bash tools/venv.sh train)
    $PY tools/train/train.py recon --run RUN --tokenizer RUN/tokenizer.json --minutes 20
    $PY tools/train/train.py retrieval --run RUN --targets RUN/train-targets.jsonl --epochs 6 \
        --dev-store STORE --dev-dialogs dialogs_dev.csv --trellis BIN
    $PY tools/train/train.py generator --run RUN --tokenizer RUN/tokenizer.json --init RUN/recon/final \
        --targets RUN/gen-train-targets.jsonl --dev-targets RUN/gen-dev-targets.jsonl --epochs 3

Resumable: a checkpoint (model, optimizer, schedule, random state, position in the data) is
written every `--checkpoint-minutes` and at every epoch's end; rerunning the same command goes
on from it (`generator` also stops cleanly at `--time-budget-min`, after a checkpoint and an
export of what it has). Deterministic on CPU for a fixed seed and thread count. CUDA is used
when present.

The three stages run one loop (`fit`): they differ in their batches, their loss and what
happens between steps and at an epoch's end.
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

# Neighbours in tools/train/ (this file runs as a script: its folder is on sys.path).
import t5  # noqa: E402
from data import Graph, read_kg, reconstruction_examples  # noqa: E402


def log(msg):
    print(time.strftime("%H:%M:%S"), msg, file=sys.stderr, flush=True)


def device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def make_model(shape, vocab_size, seed):
    """A new model of a training shape (t5.TRAINING_SHAPES: the sizes, dropout 0.1), its
    weights drawn from `seed`."""
    return t5.build(shape, vocab_size, seed)


def load_model(path):
    from transformers import T5ForConditionalGeneration

    return T5ForConditionalGeneration.from_pretrained(str(path))


class Checkpoint:
    """`last.pt` in the stage's folder: everything needed to go on where it stopped."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / "last.pt"

    def save(self, model, opt, sched, state):
        tmp = self.path.with_suffix(".tmp")
        torch.save(
            {"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(), "state": state, "torch_rng": torch.get_rng_state()},
            tmp,
        )
        os.replace(tmp, self.path)

    def load(self, model, opt, sched):
        if not self.path.exists():
            return None
        ck = torch.load(self.path, map_location="cpu", weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        sched.load_state_dict(ck["sched"])
        torch.set_rng_state(ck["torch_rng"])
        return ck["state"]


def optimizer(model, lr, total_steps, warmup=0.06):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], lr=lr)
    w = max(1, int(total_steps * warmup))

    def factor(step):
        if step < w:
            return (step + 1) / w
        return max(0.05, 1.0 - (step - w) / max(1, total_steps - w))

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)


def pad(rows, value=0):
    n = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (n - len(r)) for r in rows], dtype=torch.long)


def seq2seq_batch(inputs, targets, dev):
    """Encoder ids, mask, decoder inputs (start token 0 then the target shifted) and labels
    (-100 on padding)."""
    x = pad(inputs).to(dev)
    labels = pad(targets, -100).to(dev)
    dec = pad([[0] + t[:-1] for t in targets]).to(dev)
    return x, (x != 0).long(), dec, labels


# ---------------------------------------------------------------------------------------
# The training loop of every stage.


def fit(model, opt, sched, ck, state, args, *, steps, per_epoch, batches, loss_of, label, between=None, epoch_end=None):
    """Trains until `state["step"]` reaches `steps`, going on from wherever it stands (a
    checkpoint's state): epoch `state["step"] // per_epoch`, from its `state["step"] %
    per_epoch`-th batch. `batches(epoch, within)` yields that epoch's batches from the
    `within`-th on; `loss_of(batch)` is the loss of one. Each step: gradients clipped to norm
    1, one optimizer and one schedule step, `state["step"]` counted, `state["loss"]` its
    moving average; a progress line at steps 5, 20, every 50th and an epoch's last, with
    `label(epoch)` in front.

    Between two steps of an epoch (never after its last step, so a resumed run never skips
    an epoch's end): `between(done)` (`done`: steps of this run) may stop the run by returning
    True, after checkpointing what it needs; otherwise a checkpoint every
    `args.checkpoint_minutes`. After an epoch's last step: `epoch_end(epoch, done)` (scores,
    keeps the best, checkpoints), which may stop the run too. Returns True when every step is
    done, False when a hook stopped it. Examples/s and the ETA count training time only."""
    done = 0
    trained, since = 0.0, time.time()
    last_ck = time.time()

    def hook(f, *a):
        nonlocal trained, since
        trained += time.time() - since
        stop = f(*a)
        since = time.time()
        return stop

    while state["step"] < steps:
        epoch, within = divmod(state["step"], per_epoch)
        model.train()
        for k, batch in zip(range(within, per_epoch), batches(epoch, within)):
            loss = loss_of(batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            state["step"] += 1
            done += 1
            state["loss"] = loss.item() if state["loss"] is None else 0.98 * state["loss"] + 0.02 * loss.item()
            last = k == per_epoch - 1
            if state["step"] % 50 == 0 or state["step"] in (5, 20) or last:
                rate = done / max(trained + time.time() - since, 1e-9)
                eta = (steps - state["step"]) / max(rate, 1e-9)
                log(f"{label(epoch)} step {state['step']}/{steps} loss {state['loss']:.3f} {rate * args.batch:.0f} examples/s eta {eta / 60:.1f} min")
            if last:
                break
            if between is not None and hook(between, done):
                return False
            if time.time() - last_ck > args.checkpoint_minutes * 60:
                ck.save(model, opt, sched, state)
                last_ck = time.time()
        if epoch_end is not None and hook(epoch_end, epoch, done):
            return False
        last_ck = time.time()
    return True


def keep_epoch(out, epoch, key, scores, state, args, started, save):
    """The bookkeeping after an epoch of a stage that keeps its best epoch by a dev `key`
    (a list, compared in order; its folder is `out/epoch-N`): the history entry, the `best`
    link when the key beats the best so far, `save()` (the checkpoint), history.json."""
    folder = out / f"epoch-{epoch + 1}"
    state["history"].append({"epoch": epoch + 1, "step": state["step"], "loss": state["loss"], "minutes": round((time.time() - started) / 60, 1), "dev": scores})
    if state["best"] is None or list(key) > list(state["best"]["key"]):
        state["best"] = {"epoch": epoch + 1, "key": list(key)}
        (out / "best").unlink(missing_ok=True)
        (out / "best").symlink_to(folder.name)
    save()
    (out / "history.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "history": state["history"], "best": state["best"]}, indent=1) + "\n")


def stop_after(args, save, name):
    """`between` for `fit`: checkpoint (`save()`) and stop once this run has done
    `--stop-after` steps."""

    def between(done):
        if args.stop_after and done >= args.stop_after:
            save()
            log(f"{name}: stopped after {done} steps (--stop-after)")
            return True
        return False

    return between


def shuffled(rows, batch, seed):
    """`batches` of an epoch-based stage: epoch e's order is `random.Random(seed + e)`'s
    shuffle of the rows, cut into `batch`-sized pieces (the last one shorter)."""
    per_epoch = math.ceil(len(rows) / batch)

    def batches(epoch, within):
        order = list(range(len(rows)))
        random.Random(seed + epoch).shuffle(order)
        for k in range(within, per_epoch):
            yield [rows[i] for i in order[k * batch : (k + 1) * batch]]

    return batches, per_epoch


def likelihood(model, dev):
    """`loss_of` for rows whose first two fields are the encoder ids and the target ids:
    transformers' token cross-entropy with teacher forcing."""

    def loss_of(batch):
        x, m, d, y = seq2seq_batch([r[0] for r in batch], [r[1] for r in batch], dev)
        return model(input_ids=x, attention_mask=m, decoder_input_ids=d, labels=y).loss

    return loss_of


# ---------------------------------------------------------------------------------------
# Stage 1: knowledge-graph reconstruction.


def recon(args):
    dev = device()
    torch.set_num_threads(args.threads)
    tok = Tokenizer.from_file(str(args.tokenizer))
    facts = []
    for f in args.kg:
        facts += read_kg(f)
    graph = Graph(facts)
    out = Path(args.run) / "recon"
    ck = Checkpoint(out)
    model = make_model(args.shape, tok.get_vocab_size(), args.seed).to(dev)
    steps = args.steps
    opt, sched = optimizer(model, args.lr, steps)
    state = ck.load(model, opt, sched) or {"step": 0, "loss": None}
    log(f"recon: {len(facts)} facts, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, {steps} steps of {args.batch}, from step {state['step']}")

    def batches(epoch, within):
        """One endless stream of examples (one "epoch" of `steps` batches)."""
        examples = reconstruction_examples(graph, args.seed)
        # Resuming replays the example stream to where it stopped (cheap: no model work).
        for _ in range(within * args.batch):
            next(examples)
        while True:
            pairs = [next(examples) for _ in range(args.batch)]
            inputs = [e.ids for e in tok.encode_batch([p[0] for p in pairs])]
            targets = [e.ids for e in tok.encode_batch([p[1] for p in pairs])]
            yield list(zip(inputs, targets))

    fit(model, opt, sched, ck, state, args, steps=steps, per_epoch=steps, batches=batches, loss_of=likelihood(model, dev), label=lambda epoch: "recon")
    ck.save(model, opt, sched, state)
    model.save_pretrained(out / "final")
    log(f"recon: done, model in {out / 'final'}")


# ---------------------------------------------------------------------------------------
# Stage 2: retrieval training on Trellis's exported targets.


def read_targets(path, max_input):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if not r.get("target_ids"):
                continue
            rows.append((r["input_ids"][-max_input:], r["target_ids"], r["allowed"]))
    return rows


def retrieval(args):
    dev = device()
    torch.set_num_threads(args.threads)
    rows = read_targets(args.targets, args.max_input)
    out = Path(args.run) / "retrieval"
    ck = Checkpoint(out)
    model = load_model(args.init) if args.init else make_model(args.shape, Tokenizer.from_file(str(args.tokenizer)).get_vocab_size(), args.seed)
    model.to(dev)
    batches, per_epoch = shuffled(rows, args.batch, args.seed)
    steps = per_epoch * args.epochs
    opt, sched = optimizer(model, args.lr, steps)
    state = ck.load(model, opt, sched) or {"step": 0, "loss": None, "best": None, "history": []}
    log(f"retrieval: {len(rows)} examples, {per_epoch} steps an epoch, {args.epochs} epochs, from step {state['step']}")

    def loss_of(batch):
        """The likelihood over the vocabulary plus `--constrained-weight` times the one
        normalized over the tokens the constraint allows at each step."""
        x, m, d, y = seq2seq_batch([r[0] for r in batch], [r[1] for r in batch], dev)
        logits = model(input_ids=x, attention_mask=m, decoder_input_ids=d).logits
        lm = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100)
        loss = lm
        if args.constrained_weight > 0:
            t = logits.shape[1]
            mask = torch.zeros(logits.shape, dtype=torch.bool)
            have = torch.zeros(logits.shape[:2], dtype=torch.bool)
            for i, r in enumerate(batch):
                for j, s in enumerate(r[2][:t]):
                    mask[i, j, s] = True
                    have[i, j] = True
            if have.any():
                mask, have = mask.to(dev), have.to(dev)
                lp = torch.log_softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)
                gold = y.clamp(min=0).unsqueeze(-1)
                picked = lp.gather(-1, gold).squeeze(-1)
                loss = loss + args.constrained_weight * -(picked[have].mean())
        return loss

    def between(done):
        if args.stop_after and done >= args.stop_after:
            ck.save(model, opt, sched, state)
            log(f"retrieval: stopped after {done} steps (--stop-after), checkpoint {ck.path}")
            return True
        return False

    def epoch_end(epoch, done):
        """Export, let Trellis score it on dev, keep the best."""
        model.eval()
        folder = out / f"epoch-{epoch + 1}"
        model.save_pretrained(folder / "hf")
        scores = None
        if args.dev_store and args.trellis:
            scores = dev_scores(args, folder)
            log(f"epoch {epoch + 1}: dev {json.dumps(scores)}")
        state["history"].append({"epoch": epoch + 1, "step": state["step"], "loss": state["loss"], "dev": scores})
        key = (scores["path_at"]["1"], scores["path_at"]["3"]) if scores else (epoch,)
        if state["best"] is None or key > tuple(state["best"]["key"]):
            state["best"] = {"epoch": epoch + 1, "key": list(key)}
            (out / "best").unlink(missing_ok=True)
            (out / "best").symlink_to(folder.name)
        ck.save(model, opt, sched, state)
        (out / "history.json").write_text(json.dumps(state["history"], indent=1) + "\n")
        if args.stop_after and done >= args.stop_after:
            log(f"retrieval: stopped after {done} steps (--stop-after), at the end of epoch {epoch + 1}")
            return True
        return False

    if fit(model, opt, sched, ck, state, args, steps=steps, per_epoch=per_epoch, batches=batches, loss_of=loss_of,
           label=lambda epoch: f"epoch {epoch + 1}", between=between, epoch_end=epoch_end):
        log(f"retrieval: done; best epoch {state['best']['epoch']} ({out / 'best'})")


def dev_scores(args, folder):
    """Exports `folder/hf` to `folder/model` and runs `trellis eval retrieval` on dev."""
    subprocess.run(
        [sys.executable, str(HERE / "export.py"), "--hf", str(folder / "hf"), "--tokenizer", str(args.tokenizer), "--out", str(folder / "model"), "--trellis-json", str(args.trellis_json)],
        check=True,
    )
    cmd = [
        str(args.trellis), "eval", "retrieval", "--store", str(args.dev_store), "--input", str(args.dev_dialogs),
        "--retriever", "gsr", "--model", str(folder / "model"), "--json",
    ]
    if args.dev_turns:
        cmd += ["--max-turns", str(args.dev_turns)]
    res = subprocess.run(cmd, check=True, capture_output=True, text=True)
    (folder / "dev.json").write_text(res.stdout)
    rep = json.loads(res.stdout)
    rep = rep[0] if isinstance(rep, list) else rep
    keep = ("turns", "candidate_recall", "path_at", "triple_recall_at", "mrr", "top_start_entity", "top_first_relation", "turns_per_s")
    return {k: rep[k] for k in keep if k in rep}


# ---------------------------------------------------------------------------------------
# Stage 3: the response generator, on the targets `trellis targets` writes for a generator.


def read_gen_targets(path, max_target, vocab_size, limit=None):
    """(encoder ids, reply ids) of the lines with a reply. The encoder ids are used as
    written (the runtime's own truncation made them); a reply longer than `max_target` keeps
    its first `max_target` ids without the EOS: its likelihood is still right, and the model
    is not taught to stop where the cut fell."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if limit is not None and len(rows) >= limit:
                break
            r = json.loads(line)
            if r.get("skipped") or not r.get("target_ids"):
                continue
            x, y = r["input_ids"], r["target_ids"][:max_target]
            # An id past the embedding fails deep inside torch; say where it came from.
            if not x or max(x + y) >= vocab_size or min(x + y) < 0:
                raise SystemExit(f"{path}:{n}: empty input or a token id outside 0..{vocab_size - 1} (another tokenizer?)")
            rows.append((x, y))
    return rows


def token_loss(model, rows, batch, dev):
    """Mean token cross-entropy of the replies (teacher forcing), in eval mode."""
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for k in range(0, len(rows), batch):
            part = rows[k : k + batch]
            x, m, d, y = seq2seq_batch([r[0] for r in part], [r[1] for r in part], dev)
            logits = model(input_ids=x, attention_mask=m, decoder_input_ids=d).logits
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1), ignore_index=-100, reduction="sum").item()
            count += int((y != -100).sum())
    return total / max(count, 1)


def export_generator(args, model, folder):
    """`folder/hf` (transformers) and `folder/model` (the model directory the runtime loads,
    float; train.sh quantizes the final export)."""
    model.save_pretrained(folder / "hf")
    subprocess.run(
        [sys.executable, str(HERE / "export.py"), "--hf", str(folder / "hf"), "--tokenizer", str(args.tokenizer), "--out", str(folder / "model"), "--trellis-json", str(args.trellis_json)],
        check=True,
    )


def generator(args):
    dev = device()
    torch.set_num_threads(args.threads)
    vocab = Tokenizer.from_file(str(args.tokenizer)).get_vocab_size()
    out = Path(args.run) / "generator"
    ck = Checkpoint(out)
    model = load_model(args.init) if args.init else make_model(args.shape, vocab, args.seed)
    if model.config.vocab_size < vocab:
        raise SystemExit(f"{args.init}: vocab_size {model.config.vocab_size} < the tokenizer's {vocab} tokens (another tokenizer?)")
    model.to(dev)
    rows = read_gen_targets(args.targets, args.max_target, model.config.vocab_size)
    dev_rows = read_gen_targets(args.dev_targets, args.max_target, model.config.vocab_size, args.dev_lines)
    if not rows or not dev_rows:
        raise SystemExit(f"{args.targets if not rows else args.dev_targets}: no line with a reply (a retriever's targets?)")
    batches, per_epoch = shuffled(rows, args.batch, args.seed)
    steps = per_epoch * args.epochs
    opt, sched = optimizer(model, args.lr, steps)
    state = ck.load(model, opt, sched) or {"step": 0, "loss": None, "best": None, "history": []}
    log(f"generator: {len(rows)} examples, {len(dev_rows)} dev, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, {per_epoch} steps an epoch, {args.epochs} epochs, from step {state['step']}")
    started = time.time()
    budget = args.time_budget_min * 60 if args.time_budget_min else None

    def evaluate(name, epoch):
        """Dev loss of the current weights; exported and named in best.json when the best."""
        loss = token_loss(model, dev_rows, args.batch, dev)
        log(f"{name}: dev loss {loss:.4f} (train {state['loss']:.4f})")
        state["history"].append({"name": name, "epoch": epoch, "step": state["step"], "loss": state["loss"], "dev_loss": loss})
        if state["best"] is None or loss < state["best"]["dev_loss"]:
            folder = out / name
            export_generator(args, model, folder)
            state["best"] = {"name": name, "epoch": epoch, "step": state["step"], "dev_loss": loss}
            (out / "best").unlink(missing_ok=True)
            (out / "best").symlink_to(name)
        (out / "history.json").write_text(json.dumps(state["history"], indent=1) + "\n")
        best = dict(state["best"], model=str(out / state["best"]["name"] / "model"), finished=state["step"] >= steps)
        (out / "best.json").write_text(json.dumps(best, indent=1) + "\n")

    def between(done):
        if budget is not None and time.time() - started > budget:
            # What a session has when it stops: the best so far, this state if better.
            evaluate(f"step-{state['step']}", None)
            ck.save(model, opt, sched, state)
            log(f"generator: time budget of {args.time_budget_min:g} min spent at step {state['step']}/{steps}; rerun to go on")
            return True
        return False

    def epoch_end(epoch, done):
        evaluate(f"epoch-{epoch + 1}", epoch + 1)
        ck.save(model, opt, sched, state)
        if budget is not None and time.time() - started > budget and state["step"] < steps:
            log(f"generator: time budget of {args.time_budget_min:g} min spent after epoch {epoch + 1}; rerun to go on")
            return True
        return False

    if fit(model, opt, sched, ck, state, args, steps=steps, per_epoch=per_epoch, batches=batches, loss_of=likelihood(model, dev),
           label=lambda epoch: f"epoch {epoch + 1}", between=between, epoch_end=epoch_end):
        log(f"generator: done; best {state['best']['name']}, dev loss {state['best']['dev_loss']:.4f} ({out / 'best.json'})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="stage", required=True)
    for name in ("recon", "retrieval", "generator"):
        p = sub.add_parser(name)
        p.add_argument("--run", type=Path, required=True, help="the run's folder (checkpoints, exports, logs)")
        p.add_argument("--tokenizer", type=Path, required=True)
        p.add_argument("--shape", choices=t5.TRAINING_SHAPES, default="small-cpu")
        p.add_argument("--seed", type=int, default=20261124)
        p.add_argument("--threads", type=int, default=2)
        p.add_argument("--lr", type=float, default=1e-3)
        p.add_argument("--checkpoint-minutes", type=float, default=5)
    p = sub.choices["recon"]
    p.add_argument("--kg", type=Path, nargs="+", required=True)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch", type=int, default=64)
    p = sub.choices["retrieval"]
    p.add_argument("--targets", type=Path, required=True, help="`trellis targets` output on the training dialogs")
    p.add_argument("--init", type=Path, help="start from this saved model (the recon stage's `final`)")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--max-input", type=int, default=128)
    p.add_argument("--constrained-weight", type=float, default=1.0)
    p.add_argument("--trellis", type=Path, help="the trellis binary, for dev scores between epochs")
    p.add_argument("--trellis-json", type=Path, required=True)
    p.add_argument("--dev-store", type=Path)
    p.add_argument("--dev-dialogs", type=Path)
    p.add_argument("--dev-turns", type=int, default=600)
    p.add_argument("--stop-after", type=int, help="checkpoint and stop after this many steps of this run (checks)")
    p = sub.choices["generator"]
    p.add_argument("--targets", type=Path, required=True, help="`trellis targets --model GEN_SPEC` on the training dialogs")
    p.add_argument("--dev-targets", type=Path, required=True, help="the same on the dev dialogs, for the dev loss")
    p.add_argument("--dev-lines", type=int, default=1000, help="dev replies scored (the first ones)")
    p.add_argument("--init", type=Path, help="start from this saved model (the recon stage's `final`)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--max-target", type=int, default=64, help="reply ids trained on (the first ones)")
    p.add_argument("--time-budget-min", type=float, help="stop cleanly (checkpoint, export) once this is spent")
    p.add_argument("--trellis-json", type=Path, default=HERE / "generator.json")
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True, warn_only=True)
    random.seed(args.seed)
    # Dropout's masks: a stage started from `--init` never calls make_model, which seeds too.
    torch.manual_seed(args.seed)
    {"recon": recon, "retrieval": retrieval, "generator": generator}[args.stage](args)


if __name__ == "__main__":
    main()
