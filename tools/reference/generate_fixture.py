#!/usr/bin/env python3
"""The grounded response generator's test fixture and goldens (src/generate/).

    PY=$(bash tools/venv.sh train)
    $PY -m tools.reference.generate_fixture --force     # rewrites tests/fixtures/generate/{tiny-merged,tiny-split,goldens.json}
    $PY -m tools.reference.generate_fixture --force --goldens-only   # rewrites goldens.json alone

The committed fixture is frozen: without `--force` it refuses to write over it. With
`--goldens-only` the ONNX models are not written: the PyTorch model is rebuilt from its seed,
checked against the committed ONNX files with onnxruntime (so the goldens are of those
models), every golden already committed must come out equal, and goldens.json is rewritten
with the new ones added.

A tiny randomly initialised T5 (the shape and the tokenizer of tests/fixtures/gsr; the builder,
export and check of tools/train/t5.py), exported to ONNX in both optimum layouts and checked against PyTorch
with onnxruntime, with `trellis.json` saying `"task": "generator"`. Its output embedding row
of `</s>` is set to a fixed multiple of the mean final decoder state (computed on fixed
calibration texts), so sequences end with `</s>` after varied numbers of tokens instead of
always running to `max_new_tokens`.

Goldens: for a few (history, gold knowledge paths) samples of OpenDialKG's dev dialogs, for
every input encoding of src/generate/encoding.rs (re-stated here independently, below), the
encoder input text, its ids (after the truncation rule), and what transformers `generate`
returns on the PyTorch model for greedy search, greedy search with an extra stop id (as
`eos_token_id=[1, id]`) and beam search (num_beams 4, length_penalty 1.5, early_stopping,
2 returned sequences, with `sequences_scores`), max_new_tokens 20; and greedy and beam
search again with transformers' logits processors on (`PROCESSORS`: no_repeat_ngram_size,
min_new_tokens, repetition_penalty, each alone and all three together, and a penalty below 1).

Deterministic: fixed seeds, one thread, PYTHONHASHSEED=0 (optimum's merge).
"""
if not __package__:
    raise SystemExit("run it from the repository root as a module: python -m tools.reference.generate_fixture")
import argparse
import csv
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import tools

if __name__ == "__main__":
    tools.rerun_with_hash_seed(__spec__)
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


from tools.train import t5  # noqa: E402
from tools.train.linearize import preset, render_path  # noqa: E402

OUT = ROOT / "tests/fixtures/generate"
TOKENIZER = ROOT / "tests/fixtures/gsr/tiny-split/tokenizer.json"
DEV_DIALOGS = Path(os.environ.get("TRELLIS_SHARED_DATA", "/work/shared/data")) / "opendialkg/dialogs_dev.csv"
SEED = 11
EOS_GAIN = 0.85
MAX_NEW_TOKENS = 20
BEAM = {"num_beams": 4, "length_penalty": 1.5, "early_stopping": True, "num_return_sequences": 2}
# Logits processors, as `generate` arguments: each alone and the three together, with values
# that change most outputs of this model (the test checks that they do).
PROCESSORS = {
    "no_repeat_ngram": {"no_repeat_ngram_size": 2},
    "min_new_tokens": {"min_new_tokens": 8},
    "repetition_penalty": {"repetition_penalty": 1.5},
    "all": {"no_repeat_ngram_size": 3, "min_new_tokens": 6, "repetition_penalty": 1.3},
    # Below 1 the penalty rewards what was written, the start token (the pad id) included:
    # here that token counts (8 greedy and 8 beam outputs of 35 differ when it is left out
    # with prompt_ignore_length=1).
    "repetition_reward": {"repetition_penalty": 0.1},
}
# Samples of the dev set (assistant actions with a gold path, in file order; see `samples`).
PICKS = [0, 2, 6, 8, 13, 22]
# One more: the history of sample 14 with no knowledge at all.
NO_KNOWLEDGE = 14
TEMPLATE = "facts: {invariant} | entities: {entities} | paths: {paths}</s>history: {history}"

# The model directory's trellis.json: every message of the history (turns 0), cut to 80 ids
# so that the longer samples exercise the truncation rule.
INPUT = {"turns": 0, "speaker_prefix": False, "separator": " ", "max_tokens": 80}
TRELLIS_JSON = {
    "format": 1,
    "task": "generator",
    "linearization": "dialoggsr",
    "input": INPUT,
    "generation": {
        "encoding": "dialoggsr",
        "strategy": "beam",
        "beams": 4,
        "return_sequences": 1,
        "length_penalty": 1.5,
        "early_stopping": True,
        "max_new_tokens": MAX_NEW_TOKENS,
        "temperature": 1.0,
        "top_k": 50,
        "top_p": 1.0,
        "seed": 0,
    },
}

CALIBRATION = [
    "knowledge: [HEAD] jordan spieth [Int1_1][Int1_2] sport played [Int2_1][Int2_2] golf [TAIL]</s>dialogue: Do you know anything about Jordan Spieth?",
    "Song ~Kind of composition We Found Love We Found Love Composer Calvin Harris I like dance songs",
    "What do you think about Carly Rae Jepsen?",
    "Émile Zola Germinal Novel hello there how are you",
    "I like Tom Hanks.",
    "Fiction ~has_genre Without Remorse Thriller",
]


# ---------------------------------------------------------------------------------------
# Input encodings, re-stated from the documentation of src/generate/encoding.rs.


def history_text(messages):
    """The last `turns` messages (0: all), oldest first, `text` or `speaker: text`, joined."""
    turns = INPUT["turns"]
    msgs = messages[-turns:] if turns else messages
    parts = [f"{m['speaker']}: {m['text']}" if INPUT["speaker_prefix"] else m["text"] for m in msgs]
    return INPUT["separator"].join(parts)


def inverse(triple):
    h, r, t = triple
    return (t, r[1:] if r.startswith("~") else "~" + r, h)


def all_triples(paths):
    return [tuple(t) for p in paths for t in p]


def triples_text(triples):
    return " ".join(f"{h} {r} {t}" for h, r, t in triples)


def naive(paths):
    return triples_text(all_triples(paths))


def invariant(paths):
    z = set(all_triples(paths))
    z |= {inverse(t) for t in z}
    return triples_text(sorted(z))


def entities(paths):
    return " ".join(sorted({e for h, _, t in all_triples(paths) for e in (h, t)}))


def gsr_paths(paths):
    """The dialoggsr linearization of each path (`~r` walks r backwards), joined by [SEP]."""
    lin = preset("dialoggsr")
    out = []
    for p in paths:
        hops = [(r[1:], True, t) if r.startswith("~") else (r, False, t) for _, r, t in p]
        out.append(render_path(lin, p[0][0], hops))
    return f" {''.join(lin['sep'])} ".join(out)


def render_template(template, slots):
    def sub(m):
        if m.group(0) == "{{":
            return "{"
        if m.group(0) == "}}":
            return "}"
        return slots[m.group(1)]

    return re.sub(r"\{\{|\}\}|\{([a-z]+)\}", sub, template)


def encoder_text(encoding, messages, paths):
    h = history_text(messages)
    if encoding == "dialoggsr":
        return f"knowledge: {gsr_paths(paths)}</s>dialogue: {h}"
    if encoding in ("surge", "invariant", "efficient"):
        k = {"surge": naive, "invariant": invariant, "efficient": entities}[encoding](paths)
        return " ".join(x for x in (k, h) if x)
    assert encoding == "template"
    slots = {"history": h, "paths": gsr_paths(paths), "triples": naive(paths), "invariant": invariant(paths), "entities": entities(paths)}
    return render_template(TEMPLATE, slots)


def encoder_input(tok, encoding, messages, paths):
    """Drops the oldest message while the ids are over max_tokens and more than one message
    is left; then, still over, keeps the last max_tokens - 1 ids before the final </s>."""
    turns = INPUT["turns"]
    msgs = messages[-turns:] if turns else list(messages)
    dropped = 0
    while True:
        text = encoder_text(encoding, msgs, paths)
        ids = tok.encode(text).ids
        if len(ids) <= INPUT["max_tokens"] or len(msgs) <= 1:
            break
        msgs = msgs[1:]
        dropped += 1
    cut = len(ids) > INPUT["max_tokens"]
    if cut:
        assert ids[-1] == 1
        ids = ids[:-1][-(INPUT["max_tokens"] - 1) :] + [1]
    return text, ids, dropped, cut


# ---------------------------------------------------------------------------------------
# Samples.


def samples(path):
    """(dialog, history, paths) per assistant action with a gold path and a history: every
    chat message before it, and the gold paths of the dialog's actions up to it (the last 3,
    each once)."""
    out = []
    with open(path, encoding="utf-8", newline="") as f:
        for dialog, row in enumerate(csv.DictReader(f)):
            messages, paths = [], []
            for a in json.loads(row["Messages"]):
                if a.get("type") == "chat":
                    messages.append({"speaker": a.get("sender", ""), "text": a.get("message") or ""})
                elif a.get("type") == "action":
                    triples = ((a.get("metadata") or {}).get("path") or [None, None])[1]
                    if not triples:
                        continue
                    if triples not in paths:
                        paths.append(triples)
                    if a.get("sender") == "assistant" and messages:
                        out.append((dialog, list(messages), [list(map(list, p)) for p in paths[-3:]]))
            if len(out) > max(PICKS + [NO_KNOWLEDGE]):
                break
    return out


def check_paths(paths):
    for p in paths:
        assert 1 <= len(p) <= 2, p
        for a, b in zip(p, p[1:]):
            assert a[2] == b[0], f"not a path: {p}"


# ---------------------------------------------------------------------------------------
# Model.


def make_model(vocab, tok):
    model = t5.build("tiny", vocab, SEED, tie_word_embeddings=False).eval()
    # The mean final decoder state over greedy runs of the calibration texts, and the mean
    # best logit there: </s>'s output row becomes that direction scaled to EOS_GAIN of it.
    states = []
    hook = model.decoder.final_layer_norm.register_forward_hook(lambda m, i, o: states.append(o.detach().reshape(-1, o.shape[-1])))
    with torch.no_grad():
        for text in CALIBRATION:
            model.generate(torch.tensor([tok.encode(text).ids]), max_new_tokens=MAX_NEW_TOKENS, num_beams=1, do_sample=False)
    hook.remove()
    h = torch.cat(states)
    u = h.mean(0)
    best = (h @ model.lm_head.weight.T).max(1).values.mean()
    with torch.no_grad():
        model.lm_head.weight[1] = EOS_GAIN * u / (u.norm() ** 2) * best
    return model


def generate_goldens(model, ids):
    x = torch.tensor([ids])
    mask = torch.ones_like(x)
    out = {}
    with torch.no_grad():
        g = model.generate(
            x, attention_mask=mask, num_beams=1, do_sample=False, max_new_tokens=MAX_NEW_TOKENS, output_scores=True, return_dict_in_generate=True
        )
    toks = g.sequences[0, 1:].tolist()
    score = 0.0
    for k, t in enumerate(toks):
        lp = torch.log_softmax(g.scores[k][0].double(), -1)
        score += float(lp[t])
    # The smallest gap between the best and the second-best logit along the way: the goldens
    # are only as exact as this margin is large compared with onnxruntime's rounding.
    margin = min(float(torch.topk(s[0], 2).values[0] - torch.topk(s[0], 2).values[1]) for s in g.scores)
    out["greedy"] = {"tokens": toks, "score": score, "margin": margin}
    # A stop id: the first generated token from position 2 on that did not occur before.
    stop = next((t for k, t in enumerate(toks) if k >= 2 and t != 1 and t not in toks[:k]), None)
    if stop is not None:
        with torch.no_grad():
            s = model.generate(x, attention_mask=mask, num_beams=1, do_sample=False, max_new_tokens=MAX_NEW_TOKENS, eos_token_id=[1, stop])
        st = s[0, 1:].tolist()
        assert st == toks[: toks.index(stop) + 1], (st, toks)
        out["greedy_stop"] = {"stop_id": stop, "tokens": st}
    with torch.no_grad():
        b = model.generate(x, attention_mask=mask, do_sample=False, max_new_tokens=MAX_NEW_TOKENS, output_scores=True, return_dict_in_generate=True, **BEAM)
    beams = []
    for seq, sc in zip(b.sequences.tolist(), b.sequences_scores.tolist()):
        seq = seq[1:]
        if 1 in seq:
            seq = seq[: seq.index(1) + 1]
        beams.append({"tokens": seq, "score": sc})
    out["beam"] = beams
    out["processors"] = {name: processed_goldens(model, x, mask, kw) for name, kw in PROCESSORS.items()}
    return out


def processed_goldens(model, x, mask, kw):
    """Greedy and beam search with the processors `kw` on. Greedy's score is the sum of the
    model's log_softmax of the raw logits (before the processors) of the chosen tokens, as
    Trellis reports it; its margin is taken on the processed scores that chose them. Beam
    search's score is `sequences_scores`: transformers processes the log-softmax there, so
    the processed values are what the beams add up."""
    with torch.no_grad():
        g = model.generate(
            x,
            attention_mask=mask,
            num_beams=1,
            do_sample=False,
            max_new_tokens=MAX_NEW_TOKENS,
            output_scores=True,
            output_logits=True,
            return_dict_in_generate=True,
            **kw,
        )
    toks = g.sequences[0, 1:].tolist()
    score = sum(float(torch.log_softmax(g.logits[k][0].double(), -1)[t]) for k, t in enumerate(toks))
    margin = min(float(torch.topk(s[0], 2).values[0] - torch.topk(s[0], 2).values[1]) for s in g.scores)
    with torch.no_grad():
        b = model.generate(
            x, attention_mask=mask, do_sample=False, max_new_tokens=MAX_NEW_TOKENS, output_scores=True, return_dict_in_generate=True, **BEAM, **kw
        )
    beams = []
    for seq, sc in zip(b.sequences.tolist(), b.sequences_scores.tolist()):
        seq = seq[1:]
        if 1 in seq:
            seq = seq[: seq.index(1) + 1]
        beams.append({"tokens": seq, "score": sc})
    return {"greedy": {"tokens": toks, "score": score, "margin": margin}, "beam": beams}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--force", action="store_true", help="rewrite the committed (frozen) fixture")
    ap.add_argument(
        "--goldens-only",
        action="store_true",
        help="rewrite goldens.json alone: the committed ONNX models are checked against the rebuilt PyTorch model, not written, "
        "and every golden already there must come out the same",
    )
    args = ap.parse_args()
    tools.refuse_overwrite([OUT / "goldens.json"] if args.goldens_only else [OUT], args.force)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    tok = Tokenizer.from_file(str(TOKENIZER))
    vocab = tok.get_vocab_size(with_added_tokens=True)
    model = make_model(vocab, tok)

    all_samples = samples(DEV_DIALOGS)
    chosen = [(f"dev-{i}", all_samples[i][1], all_samples[i][2]) for i in PICKS]
    chosen.append((f"dev-{NO_KNOWLEDGE}-no-knowledge", all_samples[NO_KNOWLEDGE][1], []))
    encodings = ["dialoggsr", "surge", "invariant", "efficient", "template"]
    examples = []
    verify_inputs = []
    for name, history, paths in chosen:
        check_paths(paths)
        ex = {"name": name, "history": history, "knowledge": paths, "encodings": {}}
        for enc in encodings:
            text, ids, dropped, cut = encoder_input(tok, enc, history, paths)
            entry = {"text": text, "ids": ids, "dropped_messages": dropped, "cut": cut}
            entry.update(generate_goldens(model, ids))
            ex["encodings"][enc] = entry
            verify_inputs.append(ids)
        examples.append(ex)

    # Export and check both layouts against PyTorch on a padded batch of golden inputs.
    batch = verify_inputs[:4]
    longest = max(len(i) for i in batch)
    input_ids = torch.tensor([i + [0] * (longest - len(i)) for i in batch])
    attention_mask = torch.tensor([[1] * len(i) + [0] * (longest - len(i)) for i in batch])
    decoder_ids = torch.tensor([[0, 5, 6, 7, 8], [0, 1500, 9, 1, 0], [0, 300, 301, 302, 303], [0, 1, 1, 1, 1]])
    worst = {}
    if args.goldens_only:
        # The models stay as committed; the goldens must be of them.
        for merged in (True, False):
            layout = "merged" if merged else "split"
            worst[layout] = t5.verify(OUT / f"tiny-{layout}", merged, model, input_ids, attention_mask, decoder_ids)
    else:
        export_models(model, tok, input_ids, attention_mask, decoder_ids, worst)
    print(f"onnxruntime vs PyTorch, largest difference: {worst}", file=sys.stderr)
    write_goldens(examples, worst, encodings, args.goldens_only)


def export_models(model, tok, input_ids, attention_mask, decoder_ids, worst):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model.save_pretrained(tmp / "hf")
        tok.save(str(tmp / "hf" / "tokenizer.json"))
        shutil.rmtree(OUT, ignore_errors=True)
        OUT.mkdir(parents=True)
        for merged in (True, False):
            layout = "merged" if merged else "split"
            onnx_dir = tmp / layout
            t5.export(tmp / "hf", onnx_dir, merged)
            worst[layout] = t5.verify(onnx_dir, merged, model, input_ids, attention_mask, decoder_ids)
            out = OUT / f"tiny-{layout}"
            out.mkdir()
            for f in onnx_dir.iterdir():
                shutil.copy(f, out / f.name)
            model.config.to_json_file(out / "config.json")
            tok.save(str(out / "tokenizer.json"), pretty=False)
            (out / "trellis.json").write_text(json.dumps(TRELLIS_JSON, indent=2) + "\n")


def write_goldens(examples, worst, encodings, goldens_only):
    golden = {
        "about": "transformers `generate` on the PyTorch twin of tests/fixtures/generate/tiny-* (tools/reference/generate_fixture.py). "
        "Per example and input encoding: the encoder text (after dropping the oldest messages while the ids are over "
        "input.max_tokens: dropped_messages), its ids (cut from the left keeping </s> when still over: cut), greedy "
        "(num_beams 1; tokens after the start token up to and including </s>; score: the sum of log_softmax of the chosen "
        "tokens; margin: the smallest top-1 minus top-2 logit gap on the way), greedy_stop (eos_token_id=[1, stop_id]) and "
        "beam (num_beams 4, length_penalty 1.5, early_stopping true, num_return_sequences 2; tokens cut after </s>; score: "
        "sequences_scores). max_new_tokens 20. processors: per set of logits processors (`processor_settings`, as generate "
        "arguments), greedy (score: the sum of log_softmax of the raw logits of the chosen tokens; margin on the processed "
        "scores) and beam (as above; sequences_scores add up the processed log-softmax).",
        "max_new_tokens": MAX_NEW_TOKENS,
        "beam": BEAM,
        "processor_settings": PROCESSORS,
        "input": INPUT,
        "template": TEMPLATE,
        "onnxruntime_max_abs_diff": worst,
        "versions": t5.versions(),
        "examples": examples,
    }
    if goldens_only:
        same_as_committed(golden)
    (OUT / "goldens.json").write_text(json.dumps(golden, ensure_ascii=False, indent=1) + "\n")

    lens = [len(e["encodings"][k]["greedy"]["tokens"]) for e in examples for k in encodings]
    blens = [len(b["tokens"]) for e in examples for k in encodings for b in e["encodings"][k]["beam"]]
    eos = sum(1 for e in examples for k in encodings for b in [e["encodings"][k]["greedy"]] + e["encodings"][k]["beam"] if b["tokens"][-1:] == [1])
    margin = min(e["encodings"][k]["greedy"]["margin"] for e in examples for k in encodings)
    drops = sum(e["encodings"][k]["dropped_messages"] > 0 for e in examples for k in encodings)
    cuts = sum(e["encodings"][k]["cut"] for e in examples for k in encodings)
    print(f"greedy lengths {lens}\nbeam lengths {blens}\nsequences ending in </s>: {eos}; smallest greedy margin {margin:.4g}", file=sys.stderr)
    print(f"inputs with dropped messages: {drops}, cut from the left: {cuts}", file=sys.stderr)
    for d in sorted(OUT.rglob("*")):
        if d.is_file():
            print(f"{d.relative_to(ROOT)}: {d.stat().st_size} bytes, sha256 {hashlib.sha256(d.read_bytes()).hexdigest()[:16]}", file=sys.stderr)

    processed = [(e["encodings"][k]["processors"][p], e["encodings"][k]) for e in examples for k in encodings for p in PROCESSORS]
    changed = sum(pr["greedy"]["tokens"] != plain["greedy"]["tokens"] for pr, plain in processed)
    bchanged = sum([b["tokens"] for b in pr["beam"]] != [b["tokens"] for b in plain["beam"]] for pr, plain in processed)
    pmargin = min(pr["greedy"]["margin"] for pr, _ in processed)
    print(f"with processors: greedy changed {changed} of {len(processed)}, beam {bchanged}; smallest greedy margin {pmargin:.4g}", file=sys.stderr)


def same_as_committed(golden):
    """Every golden already in goldens.json equals its recomputation (the new processors'
    goldens apart): the model rebuilt from its seed is the committed one, and nothing else moved."""
    old = json.loads((OUT / "goldens.json").read_text())
    sets = old.get("processor_settings", {})
    for key, value in old.items():
        if key not in ("about", "examples", "processor_settings"):
            assert golden[key] == value, f"goldens.json: {key} changed: {value} -> {golden[key]}"
    for name, kw in sets.items():
        assert golden["processor_settings"][name] == kw, f"processor set {name} changed"
    assert len(old["examples"]) == len(golden["examples"])
    for o, n in zip(old["examples"], golden["examples"]):
        assert {k: v for k, v in o.items() if k != "encodings"} == {k: v for k, v in n.items() if k != "encodings"}, o["name"]
        assert o["encodings"].keys() == n["encodings"].keys(), o["name"]
        for enc, entry in o["encodings"].items():
            # The processors' goldens of the sets already committed must stay too.
            keep = lambda e: {k: ({p: e[k][p] for p in sets} if k == "processors" else v) for k, v in e.items()}  # noqa: E731
            assert keep(entry) == keep(n["encodings"][enc]), f"{o['name']} / {enc}: a committed golden changed"


if __name__ == "__main__":
    main()
