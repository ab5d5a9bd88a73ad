#!/usr/bin/env python3
"""The trained retriever decoded two ways over the first N OpenDialKG dev turns: by Trellis
(`trellis retrieve --retriever gsr`) and by the Python reference of the constraint issue
(tools/reference/gsr_goldens.py: the constraint and the graph prior as a transformers
LogitsProcessor over the candidate paths, S(e, M) from neighbour sets of kg.tsv), on the
PyTorch weights the ONNX files were exported from. Prints one JSON object: how many dialogs get
the same top path and the same top-5 list, and dialogs/s of each, measured in this run.

    PY=$(bash tools/venv.sh train)
    $PY -m tools.eval.gsr_reference --model models/gsr-opendialkg --hf RUN/retrieval/best/hf \
        --store STORE --trellis BIN --dialogs 200

Both decode the same encoder input: Trellis's (`--explain` prints it), so the comparison is
of the decoding, not of the entity linking. The decoding settings are the model's
`trellis.json` ones (with `model_norm: allowed`, the reference renormalizes the model's
log-probabilities over the allowed tokens as Trellis does). Two Python searches run: transformers `generate`
(the speed figure) and gsr_goldens.py's `spec_beam_search` (schema/gsr-decoding.md §5
written out, without the placeholder beams of `generate`; the agreement figure). Candidates
come from `trellis retrieve --retriever all` (capped scope, untimed).
"""
if not __package__:
    raise SystemExit("run it from the repository root as a module: python -m tools.eval.gsr_reference")
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tools

if __name__ == "__main__":
    tools.rerun_with_hash_seed(__spec__)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from tools.bench import gsr_reference as br  # noqa: E402
from tools.reference import gsr_fixture as mf  # noqa: E402
from tools.reference import gsr_goldens as mg  # noqa: E402
from tools.train import t5  # noqa: E402
from tools.train.linearize import preset  # noqa: E402

DATA = Path(os.environ.get("TRELLIS_SHARED_DATA", "/work/shared/data")) / "opendialkg"


def trellis_answers(trellis, store, model, histories, retriever_flags):
    with tempfile.TemporaryDirectory() as tmp:
        req, out = Path(tmp) / "req.jsonl", Path(tmp) / "out.jsonl"
        req.write_text("".join(json.dumps({"id": i, "history": h}) + "\n" for i, h in enumerate(histories)))
        cmd = [trellis, "retrieve", "--store", str(store), "--input", str(req), "--output", str(out), "--json"] + retriever_flags
        t = time.perf_counter()
        res = subprocess.run(cmd, check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t
        answers = [json.loads(line) for line in out.read_text().splitlines()]
    return answers, wall, json.loads(res.stdout)


def path_key(triples):
    return tuple((t["head"], t["relation"], t["tail"], t["reverse"]) for t in triples)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="the exported model directory")
    ap.add_argument("--hf", type=Path, required=True, help="the transformers weights it was exported from")
    ap.add_argument("--store", type=Path, required=True, help="a store of kg.tsv with the model's token index")
    ap.add_argument("--trellis", required=True)
    ap.add_argument("--dialogs", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import LogitsProcessorList, T5ForConditionalGeneration

    tok = Tokenizer.from_file(str(args.model / "tokenizer.json"))
    spec = json.loads((args.model / "trellis.json").read_text())
    dec = spec["decoding"]
    if dec.get("start_recency", 0) != 0:
        sys.exit(
            f"{args.model}/trellis.json asks for decoding.start_recency {dec['start_recency']}, which this reference "
            "does not implement: compare on a copy of the model whose trellis.json sets it to 0"
        )
    lin = preset(spec["linearization"])
    mg.SETTINGS.update({k: dec[k] for k in ("beams", "return_sequences", "alpha", "prior_epsilon", "length_penalty", "max_new_tokens", "early_stopping")})
    model = T5ForConditionalGeneration.from_pretrained(str(args.hf)).eval()

    pool = mg.dev_prefixes(DATA / "dialogs_dev.csv", 4 * args.dialogs)
    histories = [h for _, h, _ in pool]
    cands, _, _ = trellis_answers(args.trellis, args.store, args.model, histories, ["--retriever", "all", "--top", str(mg.TOP_ALL)])
    mg.all_candidates(cands)
    keep = [i for i, a in enumerate(cands) if a["mentioned"] and a["paths"]][: args.dialogs]
    histories = [histories[i] for i in keep]
    cands = [cands[i] for i in keep]
    flags = ["--retriever", "gsr", "--model", str(args.model), "--top", str(dec["return_sequences"]), "--explain", "--scope", "capped"]
    ours, ours_wall, ours_summary = trellis_answers(args.trellis, args.store, args.model, histories, flags)

    graph = br.NeighbourGraph(mf.read_kg(DATA / "kg.tsv"))
    same_top, same_list, spec_same_top, spec_same_list = 0, 0, 0, 0
    t_gen = 0.0
    examples = []
    for h, cand, mine in zip(histories, cands, ours):
        paths = mg.PathSet(tok, lin, cand)
        prior = dec["prior"]
        scorer = mg.Scorer(paths, graph, cand["mentioned"], prior, dec["prior_norm"] if prior != "hard" else None, dec["alpha"], dec["prior_epsilon"], dec.get("model_norm", "vocabulary"))
        ids = mine["input_ids"]
        by_tokens = {p[0]: path_key(p[2]) for p in paths.paths}
        t = time.perf_counter()
        out = model.generate(
            input_ids=torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            num_beams=dec["beams"],
            num_return_sequences=dec["return_sequences"],
            max_new_tokens=dec["max_new_tokens"],
            early_stopping=dec["early_stopping"],
            length_penalty=dec["length_penalty"],
            do_sample=False,
            logits_processor=LogitsProcessorList([mg.GsrProcessor(scorer)]),
            output_scores=True,
            return_dict_in_generate=True,
            decoder_start_token_id=0,
            eos_token_id=1,
            pad_token_id=0,
        )
        t_gen += time.perf_counter() - t
        gen = []
        for seq, score in zip(out.sequences.tolist(), out.sequences_scores.tolist()):
            if score < mg.GHOST:
                continue
            g = seq[1:]
            g = tuple(g[: g.index(1) + 1]) if 1 in g else tuple(g)
            if g in by_tokens:
                gen.append(by_tokens[g])
        spec_paths = [by_tokens[tuple(g)] for g, _ in mg.spec_beam_search(model, ids, scorer) if tuple(g) in by_tokens]
        trellis_paths = [path_key(p["triples"]) for p in mine["paths"]]
        same_top += bool(gen and trellis_paths and gen[0] == trellis_paths[0])
        same_list += gen == trellis_paths
        spec_same_top += bool(spec_paths and trellis_paths and spec_paths[0] == trellis_paths[0])
        spec_same_list += spec_paths == trellis_paths
        if spec_paths != trellis_paths and len(examples) < 3:
            examples.append({"history": [m["text"] for m in h][-2:], "trellis": trellis_paths, "reference": spec_paths})
    n = len(histories)
    print(
        json.dumps(
            {
                "dialogs": n,
                "same_top_path_generate": same_top,
                "same_top5_list_generate": same_list,
                "same_top_path_spec": spec_same_top,
                "same_top5_list_spec": spec_same_list,
                "python_generate_dialogs_per_s": n / t_gen if t_gen else None,
                "trellis_dialogs_per_s_answering": n / ours_summary["seconds_answering"] if ours_summary.get("seconds_answering") else None,
                "trellis_dialogs_per_s_wall_with_start": n / ours_wall,
                "torch_threads": args.threads,
                "load_average_1min": os.getloadavg()[0],
                "disagreements": examples,
                "versions": t5.versions(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
