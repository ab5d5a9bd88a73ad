"""The `trellis` and `dialoggsr` linearizations as src/linearize.rs defines them, re-stated
independently, and the checks a tokenizer must pass for the Rust side's token index
(check_tokenizer). Needs only `tokenizers` objects (no torch): used by
tools/reference/gsr_fixture.py and tools/train/tokenizer.py.

A leaf module (it imports nothing of tools/): tools/train/*.py run as files import it as
`linearize`, modules run with `python -m tools...` as `tools.train.linearize`.
"""

def preset(name):
    if name == "trellis":
        return {
            "head": ["[Head]"],
            "int": [[f"[Int{n}]"] for n in range(1, 5)],
            "rev": [[f"[Rev{n}]"] for n in range(1, 5)],
            "tail": ["[Tail]"],
            "sep": ["[SEP]"],
        }
    if name == "dialoggsr":
        return {
            "head": ["[HEAD]"],
            "int": [[f"[Int{n}_1]", f"[Int{n}_2]"] for n in range(1, 5)],
            "rev": [[f"[Rev{n}_1]", f"[Rev{n}_2]"] for n in range(1, 5)],
            "tail": ["[TAIL]"],
            "sep": ["[SEP]"],
        }
    raise ValueError(name)


# Both presets' boundary tokens, in the order of tools/reference/tokenizer_fixture.py (the trellis
# preset's first, so their ids match the older fixture's layout), then the authors' 18.
ADDED_TOKENS = (
    ["[Head]", "[Int1]", "[Int2]", "[Int3]", "[Int4]", "[Rev1]", "[Rev2]", "[Tail]", "[SEP]", "[Rev3]", "[Rev4]", "[HEAD]"]
    + [f"[{kind}{n}_{j}]" for kind in ("Int", "Rev") for n in range(1, 5) for j in (1, 2)]
    + ["[TAIL]"]
)


def entity_text(name):
    """`Linearization::entity_text` with `lowercase: true` (Rust `str::to_lowercase`)."""
    return name.lower()


def relation_text(name):
    """`Linearization::relation_text`: lowercased, `_` and `-` written as spaces."""
    return "".join(" " if c in "_-" else c for c in entity_text(name))


def render_path(lin, start, hops):
    """`Linearization::render_path`; hops are (relation, reversed, to)."""
    out = f"{''.join(lin['head'])} {entity_text(start)}"
    for i, (rel, rev, to) in enumerate(hops):
        pair = lin["rev"] if rev else lin["int"]
        out += f" {''.join(pair[2 * i])} {relation_text(rel)} {''.join(pair[2 * i + 1])} {entity_text(to)}"
    return out + f" {''.join(lin['tail'])}"


def slots(lin, side):
    """`Linearization::slots`: the (open, close) boundaries around a name of `side`; the first
    is where the token index encodes names."""
    h, i, r, t = lin["head"], lin["int"], lin["rev"], lin["tail"]
    if side == "relation":
        return [(i[0], i[1]), (r[0], r[1]), (i[2], i[3]), (r[2], r[3])]
    out = [(h, i[0]), (h, r[0])]
    for first in (i[1], r[1]):
        for close in (t, i[2], r[2]):
            out.append((first, close))
    out += [(i[3], t), (r[3], t)]
    return out


def between(ids, open_ids, close_ids):
    """The ids strictly between the first `open_ids` and the next `close_ids` (tokenizer.rs)."""
    n = len(open_ids)
    start = next(k for k in range(len(ids)) if ids[k : k + n] == open_ids) + n
    m = len(close_ids)
    end = next(k for k in range(start, len(ids)) if ids[k : k + m] == close_ids)
    return ids[start:end]


def name_ids(tok, lin, side, name, slot=0):
    """A name's ids as the token index computes them: encoded inside its slot."""
    open_b, close_b = slots(lin, side)[slot]
    text_fn = entity_text if side == "entity" else relation_text
    enc = tok.encode(f"{''.join(open_b)} {text_fn(name)} {''.join(close_b)}", add_special_tokens=False).ids
    return between(enc, [tok.token_to_id(t) for t in open_b], [tok.token_to_id(t) for t in close_b])


def check_tokenizer(tok, facts):
    """What the Rust side relies on: special ids, boundaries as single tokens, names whose ids
    do not depend on their slot (both presets, every name of the sample), full path text =
    boundaries + names, and lowercasing that needs no context."""
    assert [tok.token_to_id(t) for t in ("<pad>", "</s>", "<unk>")] == [0, 1, 2]
    assert tok.encode("a b").ids[-1] == 1, "the post-processor appends </s>"
    for t in ADDED_TOKENS:
        assert tok.token_to_id(t) is not None and tok.encode(t, add_special_tokens=False).ids == [tok.token_to_id(t)], t
    entities = sorted({e for s, _, o in facts for e in (s, o)})
    relations = sorted({r for _, r, _ in facts})
    for name in entities + relations:
        # Rust lowercases per char except Greek final sigma, as Python does; a name whose
        # lowercase depends on context anywhere else would be a portability risk: refuse it.
        per_char = "".join(c.lower() for c in name)
        assert name.lower() == per_char or "\u03a3" in name, f"context-dependent lowercase: {name!r}"
        assert tok.encode(entity_text(name), add_special_tokens=False).ids, name
    for lname in ("trellis", "dialoggsr"):
        lin = preset(lname)
        for side, names in (("entity", entities), ("relation", relations)):
            for name in names:
                first = name_ids(tok, lin, side, name, 0)
                assert first, f"{name!r} has no ids"
                for k in range(1, len(slots(lin, side))):
                    other = name_ids(tok, lin, side, name, k)
                    assert other == first, f"{lname}: {side} {name!r}: {first} in slot 0 but {other} in slot {k}"
        # A whole path's ids are its boundaries' and names' ids, one after the other.
        for s, r, o in facts[:200]:
            for rev in (False, True):
                start, to = (o, s) if rev else (s, o)
                text = render_path(lin, start, [(r, rev, to)])
                ids = tok.encode(text, add_special_tokens=False).ids
                b = lin["rev"] if rev else lin["int"]
                tid = lambda ts: [tok.token_to_id(t) for t in ts]  # noqa: E731
                want = (
                    tid(lin["head"]) + name_ids(tok, lin, "entity", start) + tid(b[0]) + name_ids(tok, lin, "relation", r) + tid(b[1])
                    + name_ids(tok, lin, "entity", to) + tid(lin["tail"])
                )
                assert ids == want, f"{text!r}: {ids} != {want}"
