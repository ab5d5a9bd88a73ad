#!/usr/bin/env python3
"""Speed of the Python reference of generative subgraph retrieval: dialogs per second of
transformers `generate` with the constraint + graph-prior LogitsProcessor of
tools/reference/gsr_goldens.py,
on CPU with a fixed number of torch threads, over the first N OpenDialKG dev turns. Prints
one JSON object.

    PY=$(bash tools/venv.sh train)
    $PY -m tools.bench.gsr_reference --model ~/.cache/trellis/models/t5-small-random --dialogs 50 \\
        --requests-out /tmp/req.jsonl        # the same requests for `trellis retrieve`

The model directory needs PyTorch weights (`model.safetensors`, written by
`python -m tools.reference.gsr_fixture --shape t5-small`); the committed tiny fixture has none and is rebuilt from
its seed (checked against logits_golden.json). Candidates come from the real `trellis`
binary (`retrieve --retriever all`, timed apart: it is not part of the reference); the rest
(tokenizing the candidate paths, the trie, S(e, M), p_graph, the encoder input, beam search)
is timed per dialog. S(e, M) here comes from neighbour sets (the same sums as the matrix
powers of gsr_goldens.py, which would not fit for the whole OpenDialKG graph).
"""
if not __package__:
    raise SystemExit("run it from the repository root as a module: python -m tools.bench.gsr_reference")
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import tools

if __name__ == "__main__":
    tools.rerun_with_hash_seed(__spec__)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# OpenMP threads that sleep when idle: with spinning ones (libgomp's default here) two torch
# threads on a busy 2-core machine ran 17x slower than one (measured 0.23 vs 4.0 dialogs/s).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from tools.reference import gsr_fixture as mf  # noqa: E402
from tools.reference import gsr_goldens as mg  # noqa: E402
from tools.train import t5  # noqa: E402
from tools.train.linearize import preset  # noqa: E402


class NeighbourGraph:
    """S(e, M) from undirected neighbour sets: beta [e in N(m)] + beta^2 |N(e) & N(m)|, mean
    over m; `scores` returns a lazy mapping used through `index` like gsr_goldens.Graph."""

    def __init__(self, facts):
        self.nb = defaultdict(set)
        for s, _, o in facts:
            self.nb[s].add(o)
            self.nb[o].add(s)
        self.index = _Identity()

    def scores(self, mentioned, depth, beta=0.5):
        nb = self.nb
        ms = [nb[m] for m in mentioned]
        memo = {}

        def s(e):
            if e not in memo:
                ne = nb[e]
                total = 0.0
                for m, nm in zip(mentioned, ms):
                    v = beta * (e in nm)
                    if depth >= 2:
                        v += beta**2 * len(ne & nm)
                    total += v
                memo[e] = total / len(mentioned)
            return memo[e]

        return _Lazy(s)


class _Identity(dict):
    def __getitem__(self, k):
        return k

    def __contains__(self, k):
        return True


class _Lazy:
    def __init__(self, f):
        self.f = f

    def __getitem__(self, k):
        return self.f(k)


class BatchProcessor:
    """Rows of a batch of dialogs: row r belongs to dialog r // beams."""

    def __init__(self, scorers, beams):
        self.scorers, self.beams = scorers, beams

    def __call__(self, input_ids, scores):
        out = torch.empty_like(scores)
        for r in range(input_ids.shape[0]):
            sc = self.scorers[r // self.beams]
            out[r] = torch.from_numpy(sc.scores(input_ids[r, 1:].tolist(), scores[r].numpy()).astype(np.float32))
        return out


def load_model(model_dir, vocab):
    from transformers import T5ForConditionalGeneration

    if (model_dir / "model.safetensors").exists():
        return T5ForConditionalGeneration.from_pretrained(model_dir).eval()
    cfg = json.loads((model_dir / "config.json").read_text())
    if cfg["d_model"] != t5.SHAPES["tiny"]["d_model"]:
        sys.exit(f"{model_dir}: no model.safetensors (PyTorch weights); write it with python -m tools.reference.gsr_fixture --shape t5-small")
    model = t5.build("tiny", vocab, 20261123).eval()
    mg.check_twin(model)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=mf.FIXTURES / "tiny-split")
    ap.add_argument("--dialogs", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--batch", type=int, default=1, help="dialogs per generate call")
    ap.add_argument("--prior", choices=["hard", "connection", "katz"], default="katz")
    ap.add_argument("--norm", choices=["proportional", "softmax"], default="proportional")
    ap.add_argument("--model-norm", choices=["vocabulary", "allowed"], default="vocabulary", help="the model's log-softmax over the vocabulary or the allowed tokens")
    ap.add_argument("--kg", type=Path, default=mf.SAMPLE_KG, help="triples (TSV) of the store and of S(e, M)")
    ap.add_argument("--store", type=Path, help="an existing store of --kg (default: ingest --kg into a temporary one)")
    ap.add_argument("--trellis", default=str(Path(os.environ.get("CARGO_TARGET_DIR", Path.home() / ".cache/trellis/target")) / "release/trellis"))
    ap.add_argument("--requests-out", type=Path, help="write the requests (JSON lines) for the Rust side")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import LogitsProcessorList

    tok = Tokenizer.from_file(str(args.model / "tokenizer.json"))
    tj = json.loads((args.model / "trellis.json").read_text()) if (args.model / "trellis.json").exists() else {}
    lin_name = tj.get("linearization", "dialoggsr")
    if not isinstance(lin_name, str):
        sys.exit("a linearization object in trellis.json: only the presets are supported here")
    lin = preset(lin_name)
    model = load_model(args.model, tok.get_vocab_size(True))
    beams = mg.SETTINGS["beams"]

    # The first N assistant turns with a gold path whose history links to some entity.
    pool = mg.dev_prefixes(mg.DEV_DIALOGS, max(4 * args.dialogs, 200))
    histories = [h for _, h, _ in pool]
    t0 = time.perf_counter()
    if args.store:
        answers = retrieve(args.trellis, args.store, histories)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp) / "store"
            subprocess.run([args.trellis, "ingest", "--store", str(store), str(args.kg)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            answers = retrieve(args.trellis, store, histories)
    t_candidates = time.perf_counter() - t0
    work = [(h, a) for h, a in zip(histories, answers) if a["mentioned"] and a["paths"]][: args.dialogs]
    if args.requests_out:
        args.requests_out.write_text("".join(json.dumps({"id": i, "history": h}) + "\n" for i, (h, _) in enumerate(work)))

    graph = NeighbourGraph(mf.read_kg(args.kg))
    t_prep = t_gen = 0.0
    returned = 0
    t_all = time.perf_counter()
    for b in range(0, len(work), args.batch):
        chunk = work[b : b + args.batch]
        t1 = time.perf_counter()
        scorers, inputs = [], []
        for h, a in chunk:
            paths = mg.PathSet(tok, lin, a)
            scorers.append(mg.Scorer(paths, graph, a["mentioned"], args.prior, args.norm, mg.SETTINGS["alpha"], mg.SETTINGS["prior_epsilon"], args.model_norm))
            inputs.append(mg.encoder_ids(tok, h))
        longest = max(len(i) for i in inputs)
        ids = torch.tensor([i + [0] * (longest - len(i)) for i in inputs])
        mask = torch.tensor([[1] * len(i) + [0] * (longest - len(i)) for i in inputs])
        t2 = time.perf_counter()
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            num_beams=beams,
            num_return_sequences=mg.SETTINGS["return_sequences"],
            max_new_tokens=mg.SETTINGS["max_new_tokens"],
            early_stopping=mg.SETTINGS["early_stopping"],
            length_penalty=mg.SETTINGS["length_penalty"],
            do_sample=False,
            logits_processor=LogitsProcessorList([BatchProcessor(scorers, beams)]),
            output_scores=True,
            return_dict_in_generate=True,
            decoder_start_token_id=0,
            eos_token_id=1,
            pad_token_id=0,
        )
        returned += int((out.sequences_scores > mg.GHOST).sum())
        t3 = time.perf_counter()
        t_prep += t2 - t1
        t_gen += t3 - t2
    total = time.perf_counter() - t_all
    cfg = model.config
    print(
        json.dumps(
            {
                "reference": "transformers generate + constraint/prior LogitsProcessor (tools/bench/gsr_reference.py)",
                "model": str(args.model),
                "shape": {"d_model": cfg.d_model, "layers": [cfg.num_layers, cfg.num_decoder_layers], "heads": cfg.num_heads, "vocab": cfg.vocab_size},
                "dialogs": len(work),
                "prior": args.prior,
                "prior_norm": args.norm if args.prior != "hard" else None,
                "beams": beams,
                "batch": args.batch,
                "torch_threads": args.threads,
                "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                "load_average_1min": os.getloadavg()[0],
                "candidates_mean": sum(len(a["paths"]) for _, a in work) / max(1, len(work)),
                "returned_sequences": returned,
                "seconds": total,
                "dialogs_per_s": len(work) / total if total else None,
                "seconds_prepare": t_prep,
                "seconds_generate": t_gen,
                "seconds_trellis_candidates_untimed": t_candidates,
                "versions": t5.versions(),
            },
            indent=2,
        )
    )


def retrieve(trellis, store, histories):
    with tempfile.TemporaryDirectory() as tmp:
        req, out = Path(tmp) / "req.jsonl", Path(tmp) / "out.jsonl"
        req.write_text("".join(json.dumps({"id": i, "history": h}) + "\n" for i, h in enumerate(histories)))
        subprocess.run(
            [trellis, "retrieve", "--store", str(store), "--retriever", "all", "--input", str(req), "--output", str(out), "--top", str(mg.TOP_ALL), "--json"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return mg.all_candidates([json.loads(line) for line in out.read_text().splitlines()])


if __name__ == "__main__":
    main()
