#!/usr/bin/env python3
"""Goldens of constrained decoding (schema/gsr-decoding.md §2-§5) from an independent Python reference.

    PY=$(bash tools/venv.sh train)
    cargo build --release --locked --bin trellis
    $PY -m tools.reference.gsr_goldens --trellis ~/.cache/trellis/target/release/trellis --force   # rewrites tests/fixtures/gsr/goldens.json

The committed goldens are frozen: without `--force` it refuses to write over them (`--out`
elsewhere to compare).

What comes from Trellis: only the candidate set. The real `trellis` binary ingests the sample
KG into a temporary store and answers `trellis retrieve --retriever all` for each history:
the mentioned entities and every candidate path in candidate order (schema/gsr-decoding.md §3, capped mode).
Everything else is computed here without Trellis code: the token strings of the paths (the
Hugging Face tokenizer on each path's full linearized text), their prefix trie, S(e, M) by
numpy matrix powers over the whole sample KG, p_graph (schema/gsr-decoding.md §4), the encoder input (schema/gsr-decoding.md §2),
and beam search by transformers' `generate` on the PyTorch twin of tests/fixtures/gsr/tiny-*
with a LogitsProcessor holding the constraint and the prior.

transformers 4.57.6 beam search (generation/utils.py `_beam_search`), read against schema/gsr-decoding.md §5.
The processor receives log_softmax(logits) over the whole vocabulary (so `lp` is schema/gsr-decoding.md §4's) and
its output is added to the running beam scores; `renormalize_logits` stays False.
  1. Candidates: torch.topk over the flattened [beams * vocab] accumulated scores, k = 2 * beams
     (one EOS id). Flat index = beam * vocab + token, but torch.topk gives NO tie-breaking
     guarantee (spec: lower beam, then lower token first). Ties need equal float32 sums; none
     are expected with a random model, and the goldens record none.
  2. Step 0: beams 1.. are NOT dead: their running score is -1e9 (not -inf), and they hold the
     same start token. So when beam 0 has fewer than 2 * beams allowed tokens, "ghost" copies
     from beams 1.. at about -1e9 + score fill the top-k, enter the running beams when fewer than
     `beams` real non-EOS candidates exist, and can finish (EOS ranked < beams) as hypotheses
     scored about -1e9 / len. Spec §5: only beam 0 is live and -inf is never taken; there the
     ghosts do not exist. Consequences: (a) returned lists are padded with ghosts (and with the
     initial placeholders, score exactly -1e9, sequence [start, EOS]) when fewer than `beams`
     real hypotheses finish: dropped here (score < -1e6); (b) with early_stopping, ghosts count
     towards the `beams` finished hypotheses, so a sparse candidate set can stop the search
     before a real running beam finishes, where schema/gsr-decoding.md §5 would go on. The goldens compare every
     dialog with a direct implementation of schema/gsr-decoding.md §5 in this file (`spec_beam_search`) and record
     per mode whether the two agree (`spec5_agrees`); see the report printed at the end.
  3. -inf candidates: never finalized (the placeholders at -1e9 outrank them), but they can fill
     running beams when fewer than `beams` finite non-EOS candidates exist (harmless: they only
     continue at -inf).
  4. EOS: a candidate whose last token is EOS (EosTokenCriteria) ranked < beams among the
     2 * beams becomes a hypothesis with score sum / (generated_len ** length_penalty), where
     generated_len = cur_len + 1 - decoder_prompt_len counts the generated tokens with EOS and
     not the start token: as schema/gsr-decoding.md §5. EOS ranked >= beams: dropped (as spec). Non-EOS candidates
     fill the next running beams in rank order (topk of the 2 * beams with EOS ones at -1e9);
     if fewer than `beams` are non-EOS, EOS candidates at -1e9 fill the rest (ghost-like beams
     that continue after EOS; the constraint then gives them -inf).
  5. Finished set: the best `beams` of (kept, new) by score (torch.topk). With early_stopping=True
     an input takes no new hypotheses once all `beams` slots are finished, and the loop ends when
     every input is full (or no running beam can improve: the heuristic only bites when all
     slots are finished or every running score is <= -1e9 * len, i.e. all -inf): as schema/gsr-decoding.md §5.
  6. max_new_tokens: MaxLengthCriteria marks every candidate of the last step (length 1 + 64)
     as finished, so the top `beams` of that step's 2 * beams candidates are finalized (by
     rank, not "the running beams"), ending without EOS. Such a sequence is no path: dropped
     here (`dropped_unfinished`). Long names make it reachable: the sparse case "2005" has
     candidate strings of 63 and 67 ids (with EOS); the 67-id one can never be written.
  7. Output: the finished slots sorted by score, the first num_return_sequences; `sequences`
     are padded after EOS with EOS (pad_token_id 0 is falsy in `pad or eos`), cut here at the
     first EOS.
"""
if not __package__:
    raise SystemExit("run it from the repository root as a module: python -m tools.reference.gsr_goldens")
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import tools

if __name__ == "__main__":
    tools.rerun_with_hash_seed(__spec__)
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from tools.reference import gsr_fixture as mf  # noqa: E402
from tools.train import t5  # noqa: E402
from tools.train.linearize import preset, render_path  # noqa: E402

DEV_DIALOGS = Path("/work/shared/data/opendialkg/dialogs_dev.csv")

# Every candidate path: `--top` at the largest value `trellis retrieve` takes (src/limits.rs
# PATHS_TOP); an answer that reaches it may have been cut, and the script stops rather than
# use it. (At 1000, the old limit, dev dialogs with many entities reached it.)
TOP_ALL = 100_000


def all_candidates(answers):
    cut = [a["id"] for a in answers if len(a["paths"]) >= TOP_ALL]
    if cut:
        raise SystemExit(f"requests {cut[:5]}: {TOP_ALL} candidate paths or more, the most `trellis retrieve --top` returns; the candidate set may be cut")
    return answers
# (prior, prior_norm, model_norm): the model's log-softmax over the vocabulary, or over the
# allowed tokens (schema/gsr-decoding.md §4, `model_norm`; the mode's name ends in "@allowed").
MODES = [
    ("hard", None, "vocabulary"),
    ("connection", "proportional", "vocabulary"),
    ("connection", "softmax", "vocabulary"),
    ("katz", "proportional", "vocabulary"),
    ("katz", "softmax", "vocabulary"),
    ("hard", None, "allowed"),
    ("katz", "proportional", "allowed"),
]


def mode_name(prior, norm, model_norm):
    name = prior if norm is None else f"{prior}/{norm}"
    return name if model_norm == "vocabulary" else f"{name}@{model_norm}"

SETTINGS = {
    "linearization": "dialoggsr",
    "input": {"turns": 3, "speaker_prefix": False, "separator": " ", "max_tokens": 256},
    "beams": 5,
    "return_sequences": 5,
    "alpha": 0.8,
    "beta": 0.5,
    "prior_epsilon": 0.001,
    "length_penalty": 1.0,
    "max_new_tokens": 64,
    "early_stopping": True,
    "candidates": "capped (CandidateConfig::default(): facts_per_entity 100, tails_per_relation 10, paths_per_entity 100, hops 2)",
}
TIES = [0]  # equal candidate totals met by spec_beam_search (reported; none expected)
GHOST = -1e6  # scores below this are transformers' placeholders and ghost beams (docstring, 2)


# ---------------------------------------------------------------------------------------
# Histories and candidates.


def dev_prefixes(path, limit):
    """(dialog number, history, gold) for each assistant action with a gold path, as src/eval/opendialkg.rs
    reads the csv: the history is every chat message before the action."""
    out = []
    with open(path, encoding="utf-8", newline="") as f:
        for dialog, row in enumerate(csv.DictReader(f)):
            messages = []
            for a in json.loads(row["Messages"]):
                if a.get("type") == "chat":
                    messages.append({"speaker": a.get("sender", ""), "text": a.get("message") or ""})
                elif a.get("type") == "action" and a.get("sender") == "assistant":
                    triples = ((a.get("metadata") or {}).get("path") or [None, None])[1]
                    if triples and messages:
                        out.append((dialog, list(messages), triples))
            if len(out) >= limit:
                break
    return out


def run_trellis(trellis, histories, entities=None):
    """Mentioned entities and all candidate paths (candidate order) of each history (linked
    by Trellis, or the given entity keys)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        subprocess.run([trellis, "ingest", "--store", str(store), "--json", str(mf.SAMPLE_KG)], check=True, stdout=subprocess.DEVNULL)
        req, out = Path(tmp) / "req.jsonl", Path(tmp) / "out.jsonl"
        entities = entities or [None] * len(histories)
        req.write_text(
            "".join(json.dumps({"id": i, "history": h} | ({"entities": e} if e else {})) + "\n" for i, (h, e) in enumerate(zip(histories, entities)))
        )
        subprocess.run(
            [trellis, "retrieve", "--store", str(store), "--retriever", "all", "--input", str(req), "--output", str(out), "--top", str(TOP_ALL), "--threads", "1", "--json"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        answers = [json.loads(line) for line in out.read_text().splitlines()]
    assert [a["id"] for a in answers] == list(range(len(histories)))
    return all_candidates(answers)


def path_hops(triples):
    """A path of stored facts (trellis's JSON) as (start, [(relation, reversed, to)])."""
    hops, start = [], None
    for t in triples:
        frm, to = (t["tail"], t["head"]) if t["reverse"] else (t["head"], t["tail"])
        start = frm if start is None else start
        hops.append((t["relation"], t["reverse"], to))
    return start, hops


# ---------------------------------------------------------------------------------------
# Informativeness S(e, M): numpy matrix powers over the undirected 0/1 adjacency.


class Graph:
    def __init__(self, facts):
        names = sorted({e for s, _, o in facts for e in (s, o)})
        self.index = {n: i for i, n in enumerate(names)}
        n = len(names)
        a = np.zeros((n, n), dtype=np.float64)
        degree = np.zeros(n, dtype=np.int64)
        for s, _, o in facts:
            i, j = self.index[s], self.index[o]
            a[i, j] = a[j, i] = 1.0
            degree[i] += 1
            degree[j] += 1
        # KatzConfig's hub guard (10,000 facts) never applies to the sample: the plain formula.
        assert degree.max() <= 10_000
        self.a1 = a
        self.a2 = a @ a

    def scores(self, mentioned, depth, beta=0.5):
        """S(., M) for every entity: mean over m of sum_{k<=depth} beta^k (A^k)[., m]."""
        cols = [self.index[m] for m in mentioned]
        s = beta * self.a1[:, cols]
        if depth >= 2:
            s = s + beta**2 * self.a2[:, cols]
        return s.mean(axis=1)


# ---------------------------------------------------------------------------------------
# Token strings of the candidate paths and the constraint + prior.


class PathSet:
    """The candidate paths as token lists, with for each path the entity (store name) at each
    entity slot and the token span of its name."""

    def __init__(self, tok, lin, answer):
        self.tok = tok
        self.eos = 1
        self.boundary_ids = {tok.token_to_id(t) for ts in [lin["head"], lin["tail"], lin["sep"]] + lin["int"] + lin["rev"] for t in ts}
        # After these boundaries an entity name starts (H, B2 = Int2/Rev2, B4 = Int4/Rev4).
        self.entity_open = [tuple(tok.token_to_id(t) for t in b) for b in [lin["head"], lin["int"][1], lin["rev"][1], lin["int"][3], lin["rev"][3]]]
        self.paths = []  # (tokens, [(entity, start, end)], triples)
        for p in answer["paths"]:
            start, hops = path_hops(p["triples"])
            text = render_path(lin, start, hops)
            ids = tok.encode(text, add_special_tokens=False).ids + [self.eos]
            entities = [start] + [h[2] for h in hops]
            spans = self._entity_spans(ids, lin, hops)
            assert len(spans) == len(entities), text
            self.paths.append((tuple(ids), [(e, s, t) for e, (s, t) in zip(entities, spans)], p["triples"]))
        self._cache = {}

    def _entity_spans(self, ids, lin, hops):
        """[start, end) of each entity name: after H, B2, B4 up to the next boundary id."""
        tid = lambda ts: [self.tok.token_to_id(t) for t in ts]  # noqa: E731
        opens = [tid(lin["head"])] + [tid((lin["rev"] if rev else lin["int"])[2 * i + 1]) for i, (_, rev, _) in enumerate(hops)]
        spans, pos = [], 0
        for o in opens:
            k = next(k for k in range(pos, len(ids)) if ids[k : k + len(o)] == o) + len(o)
            end = next(j for j in range(k, len(ids)) if ids[j] in self.boundary_ids)
            assert end > k, "a name without tokens"
            spans.append((k, end))
            pos = end
        return spans

    def consistent(self, prefix):
        """Indices of the paths that start with `prefix` and go on after it."""
        key = tuple(prefix)
        if key not in self._cache:
            self._cache[key] = [i for i, (ids, _, _) in enumerate(self.paths) if len(ids) > len(key) and ids[: len(key)] == key]
        return self._cache[key]

    def step(self, prefix, s_of):
        """Allowed tokens at `prefix` and log p_graph of each (None: uniform prior, `s_of`
        None: no prior needed). `s_of(entity) -> (mass)` gives m(e)."""
        cons = self.consistent(prefix)
        allowed = sorted({self.paths[i][0][len(prefix)] for i in cons})
        if not allowed or s_of is None:
            return allowed, None
        i = len(prefix)
        # Entity position: some consistent path has an entity slot with start <= i <= end
        # (inside the name, or at its end where the next boundary starts). All consistent
        # paths share the prefix, hence the same boundaries and the same slot.
        slot = None
        for n, (_, s, e) in enumerate(self.paths[cons[0]][1]):
            if s <= i <= e:
                slot = n
        if slot is None:
            return allowed, None
        mass_of = {}  # entity -> (its name, {token it passes its mass to})
        for pi in cons:
            ids, ents, _ = self.paths[pi]
            e, s, t = ents[slot]
            assert s <= i <= t
            name = ids[s:t]
            _, targets = mass_of.setdefault(e, (name, set()))
            # Name continues: its next token; name ends here: the boundary after it on this path.
            targets.add(ids[i])
        mass = {w: 0.0 for w in allowed}
        for e, (name, targets) in mass_of.items():
            m = s_of(e)
            if len(name) > i - self.paths[cons[0]][1][slot][1]:
                assert len(targets) == 1
            for w in targets:
                mass[w] += m / len(targets)
        return allowed, mass


def log_prior(mass, norm):
    ws = sorted(mass)
    v = np.array([mass[w] for w in ws], dtype=np.float64)
    if norm == "proportional":
        lp = np.log(v / v.sum())
    else:
        z = v - v.max()
        lp = z - np.log(np.exp(z).sum())
    return dict(zip(ws, lp))


class Scorer:
    """score(w) per schema/gsr-decoding.md §4 for one dialog and one mode."""

    def __init__(self, paths, graph, mentioned, prior, norm, alpha, eps, model_norm="vocabulary"):
        self.paths, self.prior, self.norm, self.alpha = paths, prior, norm, alpha
        assert model_norm in ("vocabulary", "allowed"), model_norm
        self.model_norm = model_norm
        if prior == "hard":
            self.s_of = None
        else:
            s = graph.scores(mentioned, 1 if prior == "connection" else 2)
            base = (lambda e: s[graph.index[e]] + eps) if norm == "proportional" else (lambda e: s[graph.index[e]])
            self.s_of = base
        self._cache = {}

    def scores(self, prefix, lp_row):
        """float64 scores over the vocabulary (-inf where not allowed) from lp (float32 row)."""
        key = tuple(prefix)
        if key not in self._cache:
            allowed, mass = self.paths.step(prefix, self.s_of)
            if self.prior == "hard" or not allowed:
                logp = None
            elif mass is None:
                logp = {w: -math.log(len(allowed)) for w in allowed}
            else:
                logp = log_prior(mass, self.norm)
            self._cache[key] = (allowed, logp)
        allowed, logp = self._cache[key]
        out = np.full(lp_row.shape[0], -np.inf, dtype=np.float64)
        # model_norm "allowed": the log-softmax renormalized over the allowed set (shifting
        # log-probabilities by a constant is shifting the logits: the same distribution).
        shift = 0.0
        if self.model_norm == "allowed" and allowed:
            vals = np.array([float(lp_row[w]) for w in allowed], dtype=np.float64)
            top = vals.max()
            shift = float(top + np.log(np.exp(vals - top).sum()))
        for w in allowed:
            lp = float(lp_row[w]) - shift
            out[w] = lp if logp is None else self.alpha * lp + (1 - self.alpha) * logp[w]
        return out


class GsrProcessor:
    """transformers LogitsProcessor: the constraint and the prior (schema/gsr-decoding.md §4)."""

    def __init__(self, scorer):
        self.scorer = scorer

    def __call__(self, input_ids, scores):
        out = torch.empty_like(scores)
        for r in range(input_ids.shape[0]):
            prefix = input_ids[r, 1:].tolist()
            out[r] = torch.from_numpy(self.scorer.scores(prefix, scores[r].numpy()).astype(np.float32))
        return out


# ---------------------------------------------------------------------------------------
# Encoder input (schema/gsr-decoding.md §2) and decoding.


def encoder_ids(tok, history, turns=3, sep=" ", max_tokens=256):
    msgs = history[-turns:] if turns else history
    ids = tok.encode(sep.join(m["text"] for m in msgs), add_special_tokens=True).ids
    if len(ids) > max_tokens:
        # Recent turns are kept: the last max_tokens - 1 ids before the final EOS, then EOS.
        ids = ids[:-1][-(max_tokens - 1) :] + [1] if ids[-1] == 1 else ids[-max_tokens:]
    return ids


def generate(model, ids, scorer):
    from transformers import LogitsProcessorList

    out = model.generate(
        input_ids=torch.tensor([ids]),
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        num_beams=SETTINGS["beams"],
        num_return_sequences=SETTINGS["return_sequences"],
        max_new_tokens=SETTINGS["max_new_tokens"],
        early_stopping=SETTINGS["early_stopping"],
        length_penalty=SETTINGS["length_penalty"],
        do_sample=False,
        logits_processor=LogitsProcessorList([GsrProcessor(scorer)]),
        output_scores=True,
        return_dict_in_generate=True,
        decoder_start_token_id=0,
        eos_token_id=1,
        pad_token_id=0,
    )
    res = []
    for seq, score in zip(out.sequences.tolist(), out.sequences_scores.tolist()):
        gen = seq[1:]
        gen = gen[: gen.index(1) + 1] if 1 in gen else gen
        res.append((gen, score))
    return res


def spec_beam_search(model, ids, scorer):
    """Spec §5 written out directly (no cache: the whole decoder input each step)."""
    beams, eos, lpen = SETTINGS["beams"], 1, SETTINGS["length_penalty"]
    with torch.no_grad():
        enc = model.encoder(input_ids=torch.tensor([ids])).last_hidden_state
    running = [([], 0.0)]  # (generated tokens, sum of scores); step 0: only beam 0
    finished = []
    for step in range(SETTINGS["max_new_tokens"]):
        dec = torch.tensor([[0] + g for g, _ in running])
        with torch.no_grad():
            logits = model(encoder_outputs=(enc.expand(len(running), -1, -1),), decoder_input_ids=dec).logits[:, -1, :]
        lps = torch.log_softmax(logits.float(), dim=-1)
        cands = []
        for b, (g, s) in enumerate(running):
            sc = scorer.scores(g, lps[b].numpy()).astype(np.float32)
            for w in np.nonzero(np.isfinite(sc))[0]:
                cands.append((float(np.float32(s) + sc[w]), b, int(w)))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        # Equal totals among the kept (or at the cut) would make torch.topk's order arbitrary.
        kept = [c[0] for c in cands[: 2 * beams + 1]]
        TIES[0] += len(kept) - len(set(kept))
        cands = cands[: 2 * beams]
        nxt = []
        last = step == SETTINGS["max_new_tokens"] - 1
        for rank, (total, b, w) in enumerate(cands):
            g = running[b][0] + [w]
            if w == eos or last:
                if rank < beams:
                    finished.append((g, total / (len(g) ** lpen)))
            elif len(nxt) < beams:
                nxt.append((g, total))
        finished.sort(key=lambda h: -h[1])
        finished = finished[:beams]
        running = nxt
        if len(finished) >= beams or not running:
            break
    return finished[: SETTINGS["return_sequences"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trellis", default=str(Path(os.environ.get("CARGO_TARGET_DIR", Path.home() / ".cache/trellis/target")) / "release/trellis"))
    ap.add_argument("--dialogs", type=int, default=20)
    ap.add_argument("--out", type=Path, default=mf.FIXTURES / "goldens.json")
    ap.add_argument("--force", action="store_true", help="rewrite the committed (frozen) goldens")
    args = ap.parse_args()
    tools.refuse_overwrite([args.out], args.force)
    torch.set_num_threads(1)

    tok = Tokenizer.from_file(str(mf.FIXTURES / "tiny-split" / "tokenizer.json"))
    model = t5.build("tiny", tok.get_vocab_size(True), 20261123).eval()
    check_twin(model)
    lin = preset("dialoggsr")
    graph = Graph(mf.read_kg())

    # Prefixes whose linked entities are in the sample (non-empty candidates): one per dialog,
    # its first such prefix in even dialogs and its last in odd ones (histories of every length).
    pool = dev_prefixes(DEV_DIALOGS, 3000)
    answers = run_trellis(args.trellis, [h for _, h, _ in pool])
    per_dialog = {}
    for (dialog, history, gold), ans in zip(pool, answers):
        if ans["mentioned"] and ans["paths"]:
            per_dialog.setdefault(dialog, []).append((history, gold, ans))
    chosen = [(h, g, None, a) for h, g, a in (v[0] if k % 2 == 0 else v[-1] for k, v in sorted(per_dialog.items()))][: args.dialogs]
    # Sparse cases: entities given (as a caller's own linker would), with 2 to 5 candidates:
    # fewer complete paths than beams, where transformers pads with ghost beams (docstring, 2).
    sparse = [["2013"], ["Northanger Abbey"], ["2005", "Gerald McCann"]]
    sparse_hist = [[{"speaker": "user", "text": f"What can you tell me about {' and '.join(e)}?"}] for e in sparse]
    for h, e, a in zip(sparse_hist, sparse, run_trellis(args.trellis, sparse_hist, sparse)):
        chosen.append((h, None, e, a))

    out_dialogs, disagreements = [], []
    for n, (history, gold, given, ans) in enumerate(chosen):
        for m in ans["mentioned"]:
            assert m in graph.index, m
        paths = PathSet(tok, lin, ans)
        ids = encoder_ids(tok, history)
        d = {
            "history": history,
            "gold": gold,
            "entities": given,
            "mentioned": ans["mentioned"],
            "candidates": len(paths.paths),
            "input_ids": ids,
            "results": {},
        }
        for prior, norm, model_norm in MODES:
            name = mode_name(prior, norm, model_norm)
            scorer = Scorer(paths, graph, ans["mentioned"], prior, norm, SETTINGS["alpha"], SETTINGS["prior_epsilon"], model_norm)
            seqs, ghosts, unfinished = described(paths, generate(model, ids, scorer))
            spec, _, spec_unfinished = described(paths, spec_beam_search(model, ids, scorer))
            agree = [s["tokens"] for s in seqs] == [s["tokens"] for s in spec] and all(abs(a["score"] - b["score"]) < 1e-4 for a, b in zip(seqs, spec))
            r = {"sequences": seqs, "dropped_ghosts": ghosts, "dropped_unfinished": unfinished, "spec5_agrees": agree}
            if not agree:
                disagreements.append((n, name, [(s["tokens"], s["score"]) for s in seqs], [(s["tokens"], s["score"]) for s in spec]))
                # What schema/gsr-decoding.md §5 returns instead (scores in float64 of float32 sums).
                r["spec5_sequences"] = spec
                r["spec5_dropped_unfinished"] = spec_unfinished
            d["results"][name] = r
        out_dialogs.append(d)
        print(f"dialog {n}: {len(paths.paths)} candidates, mentioned {ans['mentioned']}", file=sys.stderr)

    golden = {
        "about": "Constrained decoding goldens (tools/reference/gsr_goldens.py): transformers generate on the PyTorch twin of "
        "tests/fixtures/gsr/tiny-split with the constraint and graph prior of schema/gsr-decoding.md §4 as a LogitsProcessor. Candidates: "
        "`trellis retrieve --retriever all` on a store of tests/fixtures/opendialkg-sample.tsv with each history (entities: when "
        "not null, the request's `entities` keys instead of linking; gold: the dev set's annotated path, for information). "
        "input_ids: the encoder input of schema/gsr-decoding.md §2. results[mode] (mode: prior[/prior_norm][@allowed], @allowed: "
        "model_norm allowed, the log-softmax renormalized over the allowed tokens; otherwise over the vocabulary): "
        "the returned sequences best first; tokens = generated ids without the start token, with EOS; score = sequences_scores "
        "(float32, sum / generated_len); path = triples [head, relation, tail, reversed] as stored facts (reversed: walked tail "
        "to head), the first candidate with that token string; homonyms = candidates with it. Sequences transformers returns with "
        "a score below -1e6 (its -1e9 placeholders and step-0 ghost beams) or -inf are dropped (dropped_ghosts counts them), and "
        "so are sequences cut at max_new_tokens (dropped_unfinished). spec5_agrees: a direct implementation of schema/gsr-decoding.md §5 "
        "(gsr_goldens.py spec_beam_search) returned the same tokens and scores (1e-4); when not, spec5_sequences holds its "
        "answer (transformers' ghost beams ended the search early: see the script's docstring, point 2).",
        "settings": SETTINGS,
        "modes": [mode_name(*m) for m in MODES],
        "versions": t5.versions(),
        "score_ties": TIES[0],
        "dialogs": out_dialogs,
    }
    args.out.write_text(json.dumps(golden, indent=None, separators=(",", ":")) + "\n")
    print(f"{args.out}: {len(out_dialogs)} dialogs, {args.out.stat().st_size} bytes; schema/gsr-decoding.md §5 disagreements: {len(disagreements)}; score ties: {TIES[0]}", file=sys.stderr)
    for n, name, hf, spec in disagreements:
        print(f"  dialog {n} {name}:\n    transformers {hf}\n    schema/gsr-decoding.md §5      {spec}", file=sys.stderr)


def described(paths, raw):
    """Returned (tokens, score) as golden entries; transformers' ghosts and placeholders
    (score < -1e6 or -inf) and sequences that are no candidate string (cut at max_new_tokens)
    are dropped and counted."""
    seqs, ghosts, unfinished = [], 0, 0
    for gen, score in raw:
        if not math.isfinite(score) or score < GHOST:
            ghosts += 1
            continue
        matches = [p for p in paths.paths if list(p[0]) == gen]
        if not matches:
            unfinished += 1
            continue
        seqs.append({"tokens": gen, "score": score, "path": [[t["head"], t["relation"], t["tail"], t["reverse"]] for t in matches[0][2]], "homonyms": len(matches)})
    return seqs, ghosts, unfinished


def check_twin(model):
    """The PyTorch model is the one exported: its logits match the committed golden."""
    g = json.loads((mf.FIXTURES / "logits_golden.json").read_text())
    _, steps = t5.torch_reference(model, torch.tensor(g["input_ids"]), torch.tensor(g["attention_mask"]), torch.tensor(g["decoder_input_ids"]))
    worst = max(float(np.max(np.abs(np.array(s) - np.array(gs)))) for s, gs in zip(steps, g["logits"]))
    assert worst < 1e-5, f"the PyTorch twin differs from logits_golden.json by {worst}"


if __name__ == "__main__":
    main()
