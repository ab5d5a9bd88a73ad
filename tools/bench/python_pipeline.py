#!/usr/bin/env python3
"""The Python pipeline Trellis is benchmarked against.

It loads a whole triple file into a networkx MultiDiGraph, builds the same candidate
paths as `trellis retrieve` around the entities Trellis linked (entity linking is not part
of the comparison: they are read from a Trellis output file), ranks them with the same
retriever, and times both steps. With --compare it checks, request by request, that the
paths (triples) come out in the same order as in a Trellis output, with equal scores (the
same floats: Trellis's BM25 does rank_bm25's arithmetic in the same order), and exits 1 on
any disagreement. --allow-ties accepts requests that differ only in the order of paths
whose scores are within 1e-9.

The rules mirror the Rust code they are named after:
  ingest        src/ingest/parse.rs, src/ingest/build.rs
  neighbours    Store::for_each_neighbor (src/store/mod.rs)
  candidates    src/graph/candidates.rs
  retrievers    src/retrieve/mod.rs, src/retrieve/bm25.rs

Example:
  trellis retrieve --store kg --retriever all --input req.jsonl --output all.jsonl --top 1000
  trellis retrieve --store kg --retriever bm25 --input req.jsonl --output bm25.jsonl --top 1000
  python3 tools/bench/python_pipeline.py --kg kg.tsv --requests req.jsonl --mentioned all.jsonl \\
      --retriever bm25 --top 1000 --compare bm25.jsonl --out py_bm25.jsonl

A retriever is a function `rank(kg, paths, history, mentioned)` returning a list of
Scored, best first, registered in RETRIEVERS. `pcst` needs pcst_fast with numpy < 2 (its
1.0.10 wheel answers wrongly under numpy 2; checked at start).
"""

import argparse
import gzip
import json
import re
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass

import networkx as nx
import numpy as np
from rank_bm25 import BM25Okapi

# Edge directions, in the order the store visits them (Direction::Out = 0, In = 1).
OUT, IN = 0, 1
# Lines longer than this are rejected by the loader (MAX_LINE_BYTES in ingest/input.rs).
MAX_LINE_BYTES = 1 << 20
# Rust's u8::is_ascii_whitespace (no vertical tab).
ASCII_WHITESPACE = " \t\n\x0c\r"
# Scores closer than this count as equal when comparing with Trellis.
SCORE_TOLERANCE = 1e-9


# --------------------------------------------------------------------------- the graph


class KG:
    """The graph plus the dense ids Trellis's loader would have given its terms.

    Nodes are entity ids; an edge subject -> object has the relation id as its key, so a
    repeated fact is stored once (as in the store). Ids matter: the store visits
    neighbours in (direction, relation id, neighbour id) order, and the caps keep the
    first ones in that order.
    """

    def __init__(self):
        self.graph = nx.MultiDiGraph()
        self.names = []  # entity id -> name (for TSV/pipe input the name is the key)
        self.ids = {}  # name -> entity id
        self.relations = []  # relation id -> name
        self.relation_ids = {}
        self.facts_read = 0
        self.rejected = Counter()
        self.memo = None  # entity -> sorted neighbours, when memoising (--memo)

    def entity(self, key):
        e = self.ids.get(key)
        if e is None:
            e = self.ids[key] = len(self.names)
            self.names.append(key)
            self.graph.add_node(e, name=key)
        return e

    def relation(self, key):
        r = self.relation_ids.get(key)
        if r is None:
            r = self.relation_ids[key] = len(self.relations)
            self.relations.append(key)
        return r

    def neighbours(self, e):
        """Edges (direction, relation, other) of `e` in store order.

        networkx keeps neighbours in insertion order, grouped by neighbour, while the
        store groups them by relation: sort. The adjacency dicts are read directly
        (`_succ`, `_pred`): the public views cost several times more per edge on hubs. With
        `memo` the sorted lists are kept, else every call sorts afresh (a turn then costs
        the same whatever turns came before).
        """
        edges = self.memo.get(e) if self.memo is not None else None
        if edges is None:
            g = self.graph
            edges = [(OUT, r, o) for o, keys in g._succ[e].items() for r in keys]
            edges += [(IN, r, s) for s, keys in g._pred[e].items() for r in keys]
            edges.sort()
            if self.memo is not None:
                self.memo[e] = edges
        return edges


def _blank(field):
    return not field.strip(ASCII_WHITESPACE)


def load_kg(path, sep="\t", reverse_prefix="~"):
    """Reads `subject SEP relation SEP object` lines as `trellis ingest` does.

    Fields are taken verbatim (no trimming); a line is rejected when it is over the length
    limit, not UTF-8, has other than 3 fields, or has a blank field (or a relation that
    is only the reverse prefix). `~r(a, b)` is stored as `r(b, a)`. Ids are handed out in
    first-seen order: subject, then object, of each accepted line (after the turn-around).
    """
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    kg = KG()
    add_edge = kg.graph.add_edge
    for raw in data.split(b"\n"):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if not raw:
            continue
        if len(raw) > MAX_LINE_BYTES:
            kg.rejected["line_too_long"] += 1
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            kg.rejected["invalid_utf8"] += 1
            continue
        fields = line.split(sep)
        if len(fields) != 3:
            kg.rejected["wrong_column_count"] += 1
            continue
        s, r, o = fields
        if _blank(s) or _blank(r) or _blank(o):
            kg.rejected["empty_name"] += 1
            continue
        if reverse_prefix and r.startswith(reverse_prefix):
            r = r[len(reverse_prefix):]
            if _blank(r):
                kg.rejected["empty_name"] += 1
                continue
            s, o = o, s
        kg.facts_read += 1
        # Subject before object, as the loader interns them.
        s_id = kg.entity(s)
        o_id = kg.entity(o)
        add_edge(s_id, o_id, key=kg.relation(r))
    return kg


# ------------------------------------------------------------------ candidate paths


@dataclass(frozen=True)
class CandidateConfig:
    """CandidateConfig::default() of src/graph/candidates.rs."""

    facts_per_entity: int = 100
    tails_per_relation: int = 10
    paths_per_entity: int = 100
    hops: int = 2


def capped_edges(kg, e, per_relation, total, avoid=None):
    """The first hops out of `e`: at most `per_relation` per (direction, relation) and
    `total` in all, in store order. Edges to `avoid` (the start entity) are passed over
    without counting.
    """
    out = []
    group, in_group = None, 0
    for edge in kg.neighbours(e):
        if len(out) >= total:
            break
        if avoid is not None and edge[2] == avoid:
            continue
        if edge[:2] != group:
            group, in_group = edge[:2], 0
        if in_group < per_relation:
            out.append(edge)
            in_group += 1
    return out


def candidate_paths(kg, mentioned, cfg=CandidateConfig()):
    """Paths as tuples of hops (from, (direction, relation, other)): every 1-hop path
    (mentioned entities in order, repeats skipped), then every 2-hop path.
    """
    one_hop, two_hop = [], []
    seen = set()
    for m in mentioned:
        if m in seen:
            continue
        seen.add(m)
        first = capped_edges(kg, m, cfg.tails_per_relation, cfg.facts_per_entity)
        one_hop.extend(((m, edge),) for edge in first)
        if cfg.hops < 2:
            continue
        paths = 0
        for edge in first:
            if paths >= cfg.paths_per_entity:
                break
            direction, relation, other = edge
            # Never back to the start entity, by any fact.
            room = cfg.paths_per_entity - paths
            for second in capped_edges(kg, other, cfg.tails_per_relation, room, avoid=m):
                two_hop.append(((m, edge), (other, second)))
                paths += 1
    return one_hop + two_hop


def fact(hop):
    """The stored fact (subject, relation, object) a hop walks, either way."""
    frm, (direction, relation, other) = hop
    return (frm, relation, other) if direction == OUT else (other, relation, frm)


# ----------------------------------------------------------------------- retrievers


@dataclass
class Scored:
    path: tuple
    score: float
    explanation: str


def _total_order_keys(scores):
    """Integers that sort like f64::total_cmp sorts the scores (NaN and -0.0 included)."""
    bits = np.asarray(scores, dtype=np.float64).view(np.int64)
    return np.where(bits < 0, bits ^ np.int64(0x7FFFFFFFFFFFFFFF), bits).tolist()


def ranked(paths, scores, explanations):
    """Best first; Python's sort is stable, so ties keep candidate order as in Trellis."""
    keys = _total_order_keys(scores)
    order = sorted(range(len(paths)), key=keys.__getitem__, reverse=True)
    return [Scored(paths[i], float(scores[i]), explanations[i]) for i in order]


def rank_all(kg, paths, history, mentioned):
    """Every candidate, in candidate order."""
    return [Scored(p, 1.0, "candidate") for p in paths]


# Characters Rust's char::is_alphanumeric accepts (the Unicode Alphabetic property) but
# Python's str.isalnum does not: the Other_Alphabetic marks and symbols (Devanagari vowel
# signs, Arabic harakat, circled letters, ...). Made by listing, for every code point
# assigned in Python 3.11's Unicode 14, where the two disagree (rustc 1.95); the other way
# round they never do.
_RUST_ONLY_ALNUM = """
0345 0363-036F 05B0-05BD 05BF 05C1-05C2 05C4-05C5 05C7 0610-061A 064B-0657 0659-065F
0670 06D6-06DC 06E1-06E4 06E7-06E8 06ED 0711 0730-073F 07A6-07B0 0816-0817 081B-0823
0825-0827 0829-082C 08D4-08DF 08E3-08E9 08F0-0903 093A-093B 093E-094C 094E-094F
0955-0957 0962-0963 0981-0983 09BE-09C4 09C7-09C8 09CB-09CC 09D7 09E2-09E3 0A01-0A03
0A3E-0A42 0A47-0A48 0A4B-0A4C 0A51 0A70-0A71 0A75 0A81-0A83 0ABE-0AC5 0AC7-0AC9
0ACB-0ACC 0AE2-0AE3 0AFA-0AFC 0B01-0B03 0B3E-0B44 0B47-0B48 0B4B-0B4C 0B56-0B57
0B62-0B63 0B82 0BBE-0BC2 0BC6-0BC8 0BCA-0BCC 0BD7 0C00-0C04 0C3E-0C44 0C46-0C48
0C4A-0C4C 0C55-0C56 0C62-0C63 0C81-0C83 0CBE-0CC4 0CC6-0CC8 0CCA-0CCC 0CD5-0CD6
0CE2-0CE3 0D00-0D03 0D3E-0D44 0D46-0D48 0D4A-0D4C 0D57 0D62-0D63 0D81-0D83 0DCF-0DD4
0DD6 0DD8-0DDF 0DF2-0DF3 0E31 0E34-0E3A 0E4D 0EB1 0EB4-0EB9 0EBB-0EBC 0ECD 0F71-0F83
0F8D-0F97 0F99-0FBC 102B-1036 1038 103B-103E 1056-1059 105E-1060 1062-1064 1067-106D
1071-1074 1082-108D 108F 109A-109D 1712-1713 1732-1733 1752-1753 1772-1773 17B6-17C8
1885-1886 18A9 1920-192B 1930-1938 1A17-1A1B 1A55-1A5E 1A61-1A74 1ABF-1AC0 1ACC-1ACE
1B00-1B04 1B35-1B43 1B80-1B82 1BA1-1BA9 1BAC-1BAD 1BE7-1BF1 1C24-1C36 1DD3-1DF4
24B6-24E9 2DE0-2DFF A674-A67B A69E-A69F A802 A80B A823-A827 A880-A881 A8B4-A8C3 A8C5
A8FF A926-A92A A947-A952 A980-A983 A9B4-A9BF A9E5 AA29-AA36 AA43 AA4C-AA4D AA7B-AA7D
AAB0 AAB2-AAB4 AAB7-AAB8 AABE AAEB-AAEF AAF5 ABE3-ABEA FB1E 10376-1037A 10A01-10A03
10A05-10A06 10A0C-10A0F 10D24-10D27 10EAB-10EAC 11000-11002 11038-11045 11073-11074
11080-11082 110B0-110B8 110C2 11100-11102 11127-11132 11145-11146 11180-11182
111B3-111BF 111CE-111CF 1122C-11234 11237 1123E 112DF-112E8 11300-11303 1133E-11344
11347-11348 1134B-1134C 11357 11362-11363 11435-11441 11443-11445 114B0-114C1
115AF-115B5 115B8-115BE 115DC-115DD 11630-1163E 11640 116AB-116B5 1171D-1172A
1182C-11838 11930-11935 11937-11938 1193B-1193C 11940 11942 119D1-119D7 119DA-119DF
119E4 11A01-11A0A 11A35-11A39 11A3B-11A3E 11A51-11A5B 11A8A-11A97 11C2F-11C36
11C38-11C3E 11C92-11CA7 11CA9-11CB6 11D31-11D36 11D3A 11D3C-11D3D 11D3F-11D41 11D43
11D47 11D8A-11D8E 11D90-11D91 11D93-11D96 11EF3-11EF6 16F4F 16F51-16F87 16F8F-16F92
16FF0-16FF1 1BC9E 1E000-1E006 1E008-1E018 1E01B-1E021 1E023-1E024 1E026-1E02A 1E947
1F130-1F149 1F150-1F169 1F170-1F189
"""


def _char_class(ranges):
    parts = []
    for item in ranges.split():
        lo, _, hi = item.partition("-")
        parts.append(f"\\U{int(lo, 16):08X}" + (f"-\\U{int(hi, 16):08X}" if hi else ""))
    return "".join(parts)


# `\w` is str.isalnum() plus '_'; '_' is turned into a space before matching.
_TOKEN = re.compile(r"[\w" + _char_class(_RUST_ONLY_ALNUM) + "]+")


def tokenize(text):
    """bm25::tokenize: lowercase runs of letters and digits."""
    return [t.lower() for t in _TOKEN.findall(text.replace("_", " "))]


BM25_TURNS = 3


def verbalize(kg, path):
    """"head relation tail" per hop, the relation lowercased with '_' and '-' as spaces."""
    parts = []
    for hop in path:
        s, r, o = fact(hop)
        rel = kg.relations[r].lower().replace("_", " ").replace("-", " ")
        parts.append(f"{kg.names[s]} {rel} {kg.names[o]}")
    return " ".join(parts)




def rank_bm25(kg, paths, history, mentioned):
    """BM25Okapi of the verbalized paths, averaged over the queries made of the last
    l = 1..min(3, len(history)) messages (empty history: one empty query)."""
    if not paths:
        return []  # BM25Okapi divides by the corpus size
    scores = bm25_relevance([verbalize(kg, p) for p in paths], history)
    turns = max(1, min(BM25_TURNS, len(history)))
    return ranked(paths, scores, [f"bm25 {x:.4f}, mean over the last {turns} messages" for x in scores])


def bm25_relevance(texts, history):
    """Seed 003's relevance of each text: BM25Okapi against the last l = 1..L messages,
    averaged (as bm25::mean_over_last_turns)."""
    bm25 = BM25Okapi([tokenize(t) for t in texts])
    turns = max(1, min(BM25_TURNS, len(history)))
    total = np.zeros(len(texts))
    for last in range(1, turns + 1):
        query = [t for m in history[max(0, len(history) - last):] for t in tokenize(m)]
        total += bm25.get_scores(query)
    return (total / turns).tolist()


def rank_prizes(scores, k):
    """k - i for the i-th best positive score (ties keep input order)."""
    order = sorted((i for i, x in enumerate(scores) if x > 0), key=lambda i: -scores[i])
    prizes = [0.0] * len(scores)
    for rank, i in enumerate(order[:k]):
        prizes[i] = float(k - rank)
    return prizes


def decayed_prizes(scores, k, c):
    """G-Retriever's edge prizes over the k largest distinct positive scores."""
    values = sorted({x for x in scores if x > 0}, reverse=True)
    k = min(k, len(values))
    prizes = [0.0] * len(scores)
    ceiling = float(k)
    for rank, value in enumerate(values[:k]):
        holders = [i for i, x in enumerate(scores) if x == value]
        prize = min((k - rank) / len(holders), ceiling)
        for i in holders:
            prizes[i] = prize
        ceiling = prize * (1 - c)
    return prizes


PCST = {"variant": "seed003", "pruning": "gw", "node_k": 3, "edge_k": 5, "decay": 0.01}


def rank_pcst(kg, paths, history, mentioned):
    """The paths inside the prize-collecting Steiner tree (pcst_fast) of the candidates,
    prizes from BM25 ranks (seed 003) or G-Retriever's rule; as retrieve/pcst.rs."""
    import pcst_fast

    if not paths:
        return []
    entities, entity_index, facts, fact_index = [], {}, [], {}
    all_facts = [fact(h) for p in paths if len(p) == 1 for h in p] + [fact(h) for p in paths if len(p) == 2 for h in p]
    for f in all_facts:
        if f in fact_index:
            continue
        fact_index[f] = len(facts)
        facts.append(f)
        for e in (f[0], f[2]):
            if e not in entity_index:
                entity_index[e] = len(entities)
                entities.append(e)
    names = [kg.names[e] for e in entities]
    texts = [f"{kg.names[s]} {kg.relations[r].lower().replace('_', ' ').replace('-', ' ')} {kg.names[o]}" for s, r, o in facts]
    relevance = bm25_relevance(texts, history)
    prizes = rank_prizes(bm25_relevance(names, history), PCST["node_k"])
    n = len(entities)
    edges, costs, virtual_fact, edge_fact = [], [], [], []
    if PCST["variant"] == "seed003":
        fact_prizes = rank_prizes(relevance, PCST["edge_k"])
        for i, (s, _, o) in enumerate(facts):
            v = len(prizes)
            prizes.append(fact_prizes[i])
            virtual_fact.append(i)
            edges += [(entity_index[s], v), (v, entity_index[o])]
            costs += [0.5, 0.5]
            edge_fact += [i, i]
    else:
        c = PCST["decay"]
        fact_prizes = decayed_prizes(relevance, PCST["edge_k"], c)
        best = max(fact_prizes, default=0.0)
        cost = min(0.5, best * (1 - c / 2)) if best > 0 else 0.5
        virtual = []
        for i, (s, _, o) in enumerate(facts):
            if fact_prizes[i] <= cost:
                edges.append((entity_index[s], entity_index[o]))
                costs.append(cost - fact_prizes[i])
                edge_fact.append(i)
            else:
                v = n + len(virtual_fact)
                virtual_fact.append(i)
                prizes.append(fact_prizes[i] - cost)
                virtual += [(entity_index[s], v, i), (v, entity_index[o], i)]
        for a, b, i in virtual:
            edges.append((a, b))
            costs.append(0.0)
            edge_fact.append(i)
    vertices, chosen_edges = pcst_fast.pcst_fast(
        np.asarray(edges, dtype=np.int64).reshape(-1, 2), np.asarray(prizes), np.asarray(costs), -1, 1, PCST["pruning"], 0
    )
    chosen = [False] * len(facts)
    for v in vertices:
        if v >= n:
            chosen[virtual_fact[v - n]] = True
    for e in chosen_edges:
        a, b = edges[e]
        if a < n and b < n:
            chosen[edge_fact[e]] = True
    kept, scores, explanations, seen = [], [], [], set()
    variant = "seed 003" if PCST["variant"] == "seed003" else "G-Retriever"
    for p in paths:
        ids = [fact_index[fact(h)] for h in p]
        key = tuple(facts[i] for i in ids)
        if not all(chosen[i] for i in ids) or key in seen:
            continue
        seen.add(key)
        score = sum(relevance[i] for i in ids) / len(ids)
        kept.append(p)
        scores.append(score)
        explanations.append(f"in the {variant} Steiner tree; mean fact relevance {score:.4f}")
    return ranked(kept, scores, explanations)


def check_pcst_fast():
    """pcst_fast 1.0.10's wheel answers wrongly under numpy 2: refuse to run on it."""
    import pcst_fast

    nodes, edges = pcst_fast.pcst_fast(np.array([[0, 1], [1, 2]]), np.array([5.0, 0.0, 5.0]), np.array([1.0, 1.0]), -1, 1, "gw", 0)
    if sorted(nodes.tolist()) != [0, 1, 2] or sorted(edges.tolist()) != [0, 1]:
        raise SystemExit(f"pcst_fast gives a wrong answer with numpy {np.__version__}: run this with numpy < 2")


# Retrievers by name: rank(kg, candidate paths, history texts, mentioned ids) -> [Scored].
RETRIEVERS = {"all": rank_all, "bm25": rank_bm25, "pcst": rank_pcst}


# --------------------------------------------------------------------- input, output


def history_texts(request, where):
    """Message texts of a request: strings, or objects with "text" (or "message")."""
    history = request.get("history") if isinstance(request, dict) else None
    if not isinstance(history, list):
        raise SystemExit(f"{where}: no \"history\" list")
    texts = []
    for i, m in enumerate(history):
        if isinstance(m, dict):
            m = m.get("text", m.get("message"))
        if not isinstance(m, str):
            raise SystemExit(f"{where}: history[{i}] needs a \"text\" (or \"message\") string")
        texts.append(m)
    return texts


def json_lines(path):
    """(line number, parsed object) of every non-blank line, as `trellis retrieve` reads."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield n, json.loads(line)
                except json.JSONDecodeError as e:
                    raise SystemExit(f"{path}:{n}: invalid JSON: {e}")


def render(kg, scored):
    triples = []
    for hop in scored.path:
        s, r, o = fact(hop)
        triples.append({"head": kg.names[s], "relation": kg.relations[r], "tail": kg.names[o], "reverse": hop[1][0] == IN})
    return {"score": scored.score, "explanation": scored.explanation, "triples": triples}


def first_difference(mine, theirs):
    """None when the two answers agree (same id, mentioned, paths in the same order,
    equal scores), else what differs first. Explanations are not compared (their number
    formatting is Rust's)."""
    if mine["id"] != theirs.get("id"):
        return f"ids differ: {mine['id']!r} vs {theirs.get('id')!r}"
    if mine["mentioned"] != theirs.get("mentioned"):
        return f"mentioned differ: {mine['mentioned']} vs {theirs.get('mentioned')}"
    a, b = mine["paths"], theirs.get("paths", [])
    for i, (p, q) in enumerate(zip(a, b)):
        if p["triples"] != q["triples"]:
            return f"path {i}: {p['triples']} (score {p['score']!r}) vs {q['triples']} (score {q['score']!r})"
        if p["score"] != q["score"]:
            return f"path {i}: score {p['score']!r} vs {q['score']!r}"
    if len(a) != len(b):
        return f"{len(a)} paths vs {len(b)}"
    return None


def same_up_to_ties(mine, theirs):
    """Whether the paths agree once the order among near-ties is ignored: Trellis's list
    is cut into runs of consecutive scores within SCORE_TOLERANCE of each other, and each
    run must hold the same paths (in any order) as the same positions of ours.

    For retrievers whose scores are not computed in the same order on both sides: scores
    equal in exact arithmetic can come out a few ulps apart, and the sort then orders
    them by rounding noise.
    """
    a, b = mine["paths"], theirs.get("paths", [])
    if len(a) != len(b) or any(not abs(p["score"] - q["score"]) <= SCORE_TOLERANCE for p, q in zip(a, b)):
        return False
    key = lambda p: json.dumps(p["triples"], sort_keys=True)
    start = 0
    for end in range(1, len(b) + 1):
        if end == len(b) or not abs(b[end]["score"] - b[end - 1]["score"]) <= SCORE_TOLERANCE:
            if sorted(map(key, a[start:end])) != sorted(map(key, b[start:end])):
                return False
            start = end
    return True


# ----------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(
        description="Rebuild Trellis's candidate paths and rankings in Python (networkx + rank_bm25), "
        "time them, and optionally check them against a `trellis retrieve` output.",
        epilog="Prints a one-line JSON summary on stdout; exits 1 when --compare finds a disagreement.",
    )
    ap.add_argument("--kg", required=True, help="triple file (TSV, or pipe with --format pipe; .gz allowed)")
    ap.add_argument("--format", choices=["tsv", "pipe"], default="tsv", help="field separator (default: tsv)")
    ap.add_argument("--reverse-prefix", default="~", help="relation prefix marking reverses, as `trellis ingest` (default: ~)")
    ap.add_argument("--requests", required=True, help="JSON lines {\"id\", \"history\"}, the input of `trellis retrieve`")
    ap.add_argument("--mentioned", required=True, help="a `trellis retrieve` output for the same requests: its \"mentioned\" are used")
    ap.add_argument("--retriever", required=True, choices=sorted(RETRIEVERS), help="how to rank the candidates")
    ap.add_argument("--top", type=int, default=None, help="paths kept per request (default: all; `trellis retrieve --top` takes at most 1000)")
    ap.add_argument("--out", help="write the answers here, in `trellis retrieve`'s JSON-lines shape")
    ap.add_argument("--compare", help="a `trellis retrieve` output (same retriever and --top) to check against")
    ap.add_argument("--memo", action="store_true", help="keep each entity's sorted neighbours once computed (default: sort on every visit)")
    ap.add_argument(
        "--allow-ties",
        action="store_true",
        help="exit 0 when every disagreement is only an order among paths whose scores are within 1e-9",
    )
    ap.add_argument("--show", type=int, default=5, help="differences to print with --compare (default: 5)")
    ap.add_argument("--pcst-variant", choices=["seed003", "g-retriever"], default="seed003", help="pcst: prizes and costs (default: seed003)")
    ap.add_argument("--pruning", choices=["gw", "strong", "simple", "none"], default="gw", help="pcst: pcst_fast's pruning (default: gw)")
    args = ap.parse_args()
    PCST.update(variant=args.pcst_variant, pruning=args.pruning)
    if args.retriever == "pcst":
        check_pcst_fast()

    started = time.perf_counter()
    t = time.perf_counter()
    kg = load_kg(args.kg, "\t" if args.format == "tsv" else "|", args.reverse_prefix)
    load_s = time.perf_counter() - t
    print(
        f"loaded {args.kg}: {kg.facts_read} facts read, {kg.graph.number_of_edges()} stored, "
        f"{len(kg.names)} entities, {len(kg.relations)} relations, rejected {dict(kg.rejected)} in {load_s:.2f} s",
        file=sys.stderr,
    )

    if args.memo:
        kg.memo = {}
    rank = RETRIEVERS[args.retriever]
    mentioned_lines = json_lines(args.mentioned)
    same_file = args.compare is not None and args.compare == args.mentioned
    compare_lines = json_lines(args.compare) if args.compare and not same_file else None
    out = open(args.out, "w", encoding="utf-8") if args.out else None

    per_turn = []
    agree = disagree = tie_order_only = explanations_differ = 0
    shown = 0
    for n, request in json_lines(args.requests):
        where = f"{args.requests}:{n}"
        texts = history_texts(request, where)
        rid = request.get("id")
        try:
            _, linked = next(mentioned_lines)
        except StopIteration:
            raise SystemExit(f"{args.mentioned}: ends before request {rid!r} ({where})")
        if linked.get("id") != rid:
            raise SystemExit(f"{args.mentioned}: id {linked.get('id')!r} where {where} has {rid!r}; not the same requests?")
        try:
            mentioned = [kg.ids[name] for name in linked.get("mentioned", [])]
        except KeyError as e:
            raise SystemExit(f"{args.mentioned}: mentioned entity {e} is not in {args.kg}; not the same KG?")

        # Timed: candidate paths and ranking; reading, rendering and comparing are not.
        t = time.perf_counter()
        result = rank(kg, candidate_paths(kg, mentioned), texts, mentioned)
        per_turn.append(time.perf_counter() - t)

        if args.top is not None:
            result = result[: args.top]
        answer = {"id": rid, "mentioned": linked.get("mentioned", []), "paths": [render(kg, s) for s in result]}
        if out:
            out.write(json.dumps(answer, ensure_ascii=False, separators=(",", ":"), sort_keys=True) + "\n")
        if args.compare:
            if same_file:
                theirs = linked
            else:
                try:
                    _, theirs = next(compare_lines)
                except StopIteration:
                    raise SystemExit(f"{args.compare}: ends before request {rid!r} ({where})")
            diff = first_difference(answer, theirs)
            explanations_differ += any(
                p["triples"] == q.get("triples") and p["explanation"] != q.get("explanation")
                for p, q in zip(answer["paths"], theirs.get("paths", []))
            )
            if diff is None:
                agree += 1
            else:
                disagree += 1
                ties = same_up_to_ties(answer, theirs)
                tie_order_only += ties
                if shown < args.show:
                    note = " [only the order of near-tied scores differs]" if ties else ""
                    print(f"request {rid!r}: {diff}{note}", file=sys.stderr)
                    shown += 1
    if out:
        out.close()
    if args.compare and not same_file and next(compare_lines, None) is not None:
        print(f"{args.compare}: more answers than requests", file=sys.stderr)
        disagree += 1

    summary = {
        "retriever": args.retriever,
        "requests": len(per_turn),
        "load_s": round(load_s, 3),
        "retrieve_s": round(sum(per_turn), 3),
        "p50_ms": round(statistics.median(per_turn) * 1e3, 3) if per_turn else None,
        "p95_ms": round(np.percentile(per_turn, 95) * 1e3, 3) if per_turn else None,
        "wall_s": round(time.perf_counter() - started, 3),
    }
    if args.compare:
        summary.update(
            agree=agree,
            disagree=disagree,
            tie_order_only=tie_order_only,
            agree_up_to_ties=agree + tie_order_only,
            explanations_differ=explanations_differ,
        )
    print(json.dumps(summary))
    failed = disagree - (tie_order_only if args.allow_ties else 0)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except OSError as e:  # a missing or unreadable file: say which, without a traceback
        sys.exit(f"python_pipeline: {e.filename or ''}: {e.strerror or e}")
