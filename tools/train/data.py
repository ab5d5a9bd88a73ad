"""Data of the retriever's training: the knowledge graph's facts, the training dialogs'
messages, paths written as the `trellis` linearization writes them (re-stated from
src/linearize.rs; tools/train/linearize.py states the same rules and checks tokenizers against
them), and the knowledge-graph reconstruction examples of DialogGSR section 3.4."""
import csv
import json
import random

# The encoder input's entity markers (`trellis.json` input.entities): a mentioned entity in
# the last message, the one before, or earlier.
ENTITY_MARKERS = ["[Ent0]", "[Ent1]", "[Ent2]"]
# Stands for the masked entity or relation of a reconstruction example.
MASK = "[MASK]"
LINEARIZATION = "trellis"
HEAD, TAIL = "[Head]", "[Tail]"
INT = ["[Int1]", "[Int2]", "[Int3]", "[Int4]"]
REV = ["[Rev1]", "[Rev2]", "[Rev3]", "[Rev4]"]


def entity_text(name):
    """`Linearization::entity_text` with `lowercase: true`."""
    return name.lower()


def relation_text(name):
    """`Linearization::relation_text`: lowercased, `_` and `-` written as spaces."""
    return "".join(" " if c in "_-" else c for c in name.lower())


def read_kg(path):
    """Facts (subject, relation, object), `~r(a, b)` folded into `r(b, a)` as a load does;
    lines with an empty field are skipped (a load rejects them); duplicates dropped."""
    seen = set()
    out = []
    with open(path, encoding="utf-8-sig") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 3 or not all(cols):
                continue
            s, r, o = cols
            fact = (o, r[1:], s) if r.startswith("~") else (s, r, o)
            if fact[1] and fact not in seen:
                seen.add(fact)
                out.append(fact)
    return out


def chat_messages(path):
    out = []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            for a in json.loads(row["Messages"]):
                if a.get("type") == "chat" and a.get("message"):
                    out.append(a["message"])
    return out


def render_path(start, hops, mask=None):
    """`[Head] e1 [Int1] r1 [Int2] e2 ... [Tail]`; hops are (relation, reversed, to). `mask`
    is the index of the name written as [MASK]: 0 the start, 2k+1 hop k's relation, 2k+2
    its entity."""
    names = [entity_text(start)]
    for rel, _, to in hops:
        names += [relation_text(rel), entity_text(to)]
    if mask is not None:
        names[mask] = MASK
    out = f"{HEAD} {names[0]}"
    for i, (_, rev, _) in enumerate(hops):
        pair = REV if rev else INT
        out += f" {pair[2 * i]} {names[2 * i + 1]} {pair[2 * i + 1]} {names[2 * i + 2]}"
    return out + f" {TAIL}"


class Graph:
    """Adjacency of the facts, both directions, for sampling paths."""

    def __init__(self, facts):
        self.facts = facts
        self.adj = {}
        for s, r, o in facts:
            self.adj.setdefault(s, []).append((r, False, o))
            self.adj.setdefault(o, []).append((r, True, s))

    def sample_path(self, rng):
        """A random fact walked in a random direction, extended by a second hop half the
        time (never back to where it came from)."""
        s, r, o = self.facts[rng.randrange(len(self.facts))]
        if rng.random() < 0.5:
            start, hops = s, [(r, False, o)]
        else:
            start, hops = o, [(r, True, s)]
        if rng.random() < 0.5:
            here = hops[0][2]
            nexts = [h for h in self.adj.get(here, []) if h[2] != start]
            if nexts:
                hops.append(nexts[rng.randrange(len(nexts))])
        return start, hops


def reconstruction_examples(graph, seed):
    """Endless (masked path, path) pairs: one entity or relation masked, as in the paper."""
    rng = random.Random(seed)
    while True:
        start, hops = graph.sample_path(rng)
        mask = rng.randrange(1 + 2 * len(hops))
        yield render_path(start, hops, mask), render_path(start, hops)
