#!/usr/bin/env python3
"""The checks and the report of tools/bench/gpu.sh (standard library only: it runs on a bare
GPU machine).

    gpu_compare.py goldens BIN DEVICE WORK
        The fixture retriever on DEVICE against tests/fixtures/gsr/goldens.json: both layouts,
        every prior mode, all dialogs in one batch (as tests/integration/gsr.rs does on the
        CPU); the same paths in the same order and scores within 1e-4, else exit 1.
    gpu_compare.py requests SAMPLE.tsv N
        N requests from the sample graph's films with actors (as the shipped-model test makes
        them), on stdout.
    gpu_compare.py report WORK DEVICE TOL GPUS SOURCE BIN
        The markdown results of gpu.sh from WORK's answer files and times.txt; exit 1 when the
        device's answers differ from the CPU's beyond TOL.
"""
import json
import os
import subprocess
import sys

GOLDEN_TOLERANCE = 1e-4
FIXTURE = "tests/fixtures"


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"gpu_compare.py: {' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def mode_flags(mode):
    mode, _, model_norm = mode.partition("@")
    prior, _, norm = mode.partition("/")
    flags = ["--prior", prior]
    if norm:
        flags += ["--prior-norm", norm]
    if model_norm:
        flags += ["--model-norm", model_norm]
    return flags


def triples(path):
    return [[t["head"], t["relation"], t["tail"], bool(t["reverse"])] for t in path["triples"]]


def goldens(bin_, device, work):
    g = json.load(open(f"{FIXTURE}/gsr/goldens.json"))
    store = os.path.join(work, "goldens-kg")
    run([bin_, "ingest", "--store", store, f"{FIXTURE}/opendialkg-sample.tsv"])
    run([bin_, "index-tokens", "--store", store, "--tokenizer", f"{FIXTURE}/gsr/tiny-split/tokenizer.json", "--linearization", "dialoggsr"])
    requests = os.path.join(work, "goldens-requests.jsonl")
    with open(requests, "w") as f:
        for i, d in enumerate(g["dialogs"]):
            r = {"id": i, "history": d["history"]}
            if d["entities"] is not None:
                r["entities"] = d["entities"]
            f.write(json.dumps(r) + "\n")
    compared, worst, problems = 0, 0.0, []
    for layout in ["tiny-split", "tiny-merged"]:
        for mode in g["modes"]:
            out = os.path.join(work, f"goldens-{layout}-{mode.replace('/', '-')}.jsonl")
            run([bin_, "retrieve", "--store", store, "--retriever", "gsr", "--model", f"{FIXTURE}/gsr/{layout}", *mode_flags(mode),
                 "--top", "5", "--device", device, "--model-threads", "1", "--batch", str(len(g["dialogs"])), "--input", requests, "--output", out])
            answers = [json.loads(line) for line in open(out)]
            for d, a in zip(g["dialogs"], answers):
                res = d["results"][mode]
                want = res["sequences"] if res["spec5_agrees"] else res["spec5_sequences"]
                got = a["paths"]
                where = f"{layout} {mode} {d['mentioned']}"
                if [triples(p) for p in got] != [w["path"] for w in want]:
                    problems.append(f"{where}: paths {[triples(p) for p in got]} against {[w['path'] for w in want]}")
                    continue
                for p, w in zip(got, want):
                    diff = abs(p["score"] - w["score"])
                    worst = max(worst, diff)
                    if diff > GOLDEN_TOLERANCE:
                        problems.append(f"{where}: score {p['score']} against {w['score']}")
                    compared += 1
    print(f"goldens: {compared} sequences of tests/fixtures/gsr/goldens.json (2 layouts x {len(g['modes'])} modes) on {device}: "
          f"largest score difference {worst:.2e} (tolerance {GOLDEN_TOLERANCE}), {len(problems)} problems")
    if problems:
        sys.stderr.write("\n".join(problems[:20]) + "\n")
        sys.exit(1)


def requests(sample, n):
    films = []
    for line in open(sample, encoding="utf-8"):
        c = line.rstrip("\n").split("\t")
        if len(c) == 3 and c[1] == "starred_actors" and all(f != c[0] for f, _ in films):
            films.append((c[0], c[2]))
    openers = ["Have you seen {film}?", "Do you know {film}?", "I watched {film} last night."]
    replies = ["Yes, {actor} was great in it.", "I did. What else has {actor} been in?", "Not yet. Is {actor} in it?"]
    for i in range(n):
        film, actor = films[i % len(films)]
        k = (i // len(films)) % len(openers)
        history = [openers[k].format(film=film), replies[k].format(actor=actor)]
        print(json.dumps({"id": i, "history": history}))


def load(path):
    out = {}
    for line in open(path):
        v = json.loads(line)
        out[v["id"]] = v
    return out


def report(work, device, tol, gpus, source, bin_):
    tol = float(tol)
    times = {}
    for line in open(os.path.join(work, "times.txt")):
        cmd, batch, dev, secs = line.split()
        times[(cmd, int(batch), dev)] = float(secs)
    lines = [f"# Trellis on {device}: tools/bench/gpu.sh", "",
             f"GPU: {gpus}. Binary: {bin_}. Requests: {source}. ONNX Runtime: "
             f"{os.environ.get('ORT_DYLIB_PATH', 'the CPU wheel of tools/setup.sh')}.", "",
             open(os.path.join(work, "goldens.txt")).read().strip(), "",
             "| command | batch | device | seconds | requests/s | decoder tokens/s | answers against the CPU's |", "|---|---|---|---|---|---|---|"]
    failed = False
    for cmd in ["retrieve", "run"]:
        for batch in [1, 64]:
            cpu = load(os.path.join(work, f"{cmd}-{batch}-cpu.jsonl"))
            for dev in dict.fromkeys(["cpu", device]):
                got = load(os.path.join(work, f"{cmd}-{batch}-{dev}.jsonl"))
                secs = times[(cmd, batch, dev)]
                # Tokens fed to the decoders (every beam's row), from the run's --json summary.
                summary = json.load(open(os.path.join(work, f"{cmd}-{batch}-{dev}.summary.json")))
                tokens = sum(summary.get(m, {}).get("timings", {}).get(k, 0) for m, k in [("gsr", "decoder_tokens"), ("generator", "tokens")])
                agree = "(reference)"
                if dev != "cpu":
                    worst, differing = 0.0, 0
                    for i, a in cpu.items():
                        b = got.get(i)
                        same = b is not None and [triples(p) for p in a["paths"]] == [triples(p) for p in b["paths"]]
                        same = same and a.get("response") == b.get("response")
                        if same:
                            for p, q in zip(a["paths"], b["paths"]):
                                worst = max(worst, abs(p["score"] - q["score"]))
                        if not same:
                            differing += 1
                    bad = differing > 0 or worst > tol
                    failed |= bad
                    agree = f"{differing} of {len(cpu)} differ; largest score difference {worst:.2e}" + (" (beyond TOL)" if bad else "")
                lines.append(f"| {cmd} | {batch} | {dev} | {secs:.2f} | {len(got) / secs:.1f} | {tokens / secs:.0f} | {agree} |")
    print("\n".join(lines))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    what, args = sys.argv[1], sys.argv[2:]
    if what == "goldens":
        goldens(*args)
    elif what == "requests":
        requests(args[0], int(args[1]))
    elif what == "report":
        report(*args)
    else:
        sys.exit(f"gpu_compare.py: unknown check {what!r} (goldens, requests, report)")
