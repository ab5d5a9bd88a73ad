#!/usr/bin/env python3
"""The shipped retriever's tokenizer: a T5-style SentencePiece Unigram model (`<pad>`, `</s>`,
`<unk>` as ids 0-2, Metaspace pre-tokenizer, `</s>` appended) trained on the training dialogs'
messages and the knowledge graph's names, lowercased by the tokenizer itself (a small model
trained from scratch gains nothing from case, and paths are written lowercased), with the
linearization's added tokens, the entity markers of the encoder input and the reconstruction
mask.

`--generator N` makes the response generator's instead: cased (replies keep their case), the
Metaspace space prepended to the text's first piece only (so a reply's "[E2]." decodes without a
space before the full stop), and N delexicalization placeholders `[E1]`..`[EN]` as added tokens
that are not special (decoding writes them back, and the engine replaces them by names:
src/generate/delex.rs).

    PY=$(bash tools/venv.sh onnx)     # or the train environment: only `tokenizers` is needed
    $PY tools/train/tokenizer.py --out DIR/tokenizer.json [--vocab 8000] [--generator 12]

Deterministic (one thread). Checks what the Rust side relies on before writing (the checks of
tools/train/linearize.py: every name's ids are the same in every slot of a path).
"""
import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

# Neighbours in tools/train/ (this file runs as a script: its folder is on sys.path).
import linearize  # noqa: E402
from data import ENTITY_MARKERS, MASK, chat_messages, entity_text, read_kg, relation_text  # noqa: E402

EXTRA_TOKENS = ENTITY_MARKERS + [MASK]


def canonical(tok, decimals=4):
    """The trained vocabulary in an order that does not depend on the trainer's run-to-run
    noise. Two runs give the same pieces, but (1) scores differ by ~1e-11 (the trainer sums
    in hash order), so pieces of equal true score swap places, and (2) the single characters
    the trainer keeps for coverage, below every learned piece, get made-up scores a step
    apart in hash order. So: scores rounded to `decimals`, ties ordered by the piece, and those
    coverage characters all given one score (the lowest learned one's minus 1) in code point
    order. The same file every run, unless a learned score falls within 1e-11 of a rounding
    boundary (about one run in 150)."""
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    specials, rest = vocab[:3], vocab[3:]
    assert [p for p, _ in specials] == ["<pad>", "</s>", "<unk>"], specials
    floor = min(s for p, s in rest if len(p) > 1)
    learned = [[p, round(s, decimals)] for p, s in rest if len(p) > 1 or s >= floor]
    coverage = sorted(p for p, s in rest if len(p) == 1 and s < floor)
    low = round(floor, decimals) - 1.0
    rest = sorted(learned, key=lambda x: (-x[1], x[0])) + [[p, low] for p in coverage]
    j["model"]["vocab"] = specials + rest
    return Tokenizer.from_str(json.dumps(j))


def placeholders(n):
    return [f"[E{k}]" for k in range(1, n + 1)]


def train(vocab_size, facts, messages, generator=0):
    tok = Tokenizer(models.Unigram())
    case = [] if generator else [normalizers.Lowercase()]
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), *case, normalizers.Replace(Regex(" {2,}"), " ")])
    prepend = "first" if generator else "always"
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=prepend)
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme=prepend)
    trainer = trainers.UnigramTrainer(
        vocab_size=vocab_size,
        special_tokens=["<pad>", "</s>", "<unk>"],
        unk_token="<unk>",
        shrinking_factor=0.75,
        max_piece_length=16,
        n_sub_iterations=2,
    )
    names = sorted({entity_text(e) for s, _, o in facts for e in (s, o)} | {relation_text(r) for _, r, _ in facts})
    tok.train_from_iterator(names + messages, trainer=trainer)
    tok = canonical(tok)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in linearize.ADDED_TOKENS + EXTRA_TOKENS])
    if generator:
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in placeholders(generator)])
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))])
    return tok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--generator", type=int, default=0, metavar="N", help="the generator's: cased, N placeholders")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("TRELLIS_SHARED_DATA", "/work/shared/data")) / "opendialkg")
    args = ap.parse_args()
    facts = read_kg(args.data / "kg.tsv") + read_kg(args.data / "kg_train_paths.tsv")
    messages = chat_messages(args.data / "dialogs_train.csv")
    tok = train(args.vocab, facts, messages, args.generator)
    for t in EXTRA_TOKENS + placeholders(args.generator):
        assert tok.encode(t, add_special_tokens=False).ids == [tok.token_to_id(t)], t
    if args.generator:
        for t in placeholders(args.generator):
            assert tok.decode([tok.token_to_id(t)]) == t, t
        probe = "It was written by [E1]. Have you read [E2]?"
        assert tok.decode(tok.encode(probe).ids) == probe, tok.decode(tok.encode(probe).ids)
    else:
        # The slot-independence checks on the names of the training paths' facts (all of
        # kg.tsv would take minutes; these are the names the model writes most).
        linearize.check_tokenizer(tok, facts[-20000:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(args.out), pretty=False)
    print(f"tokenizer: {tok.get_vocab_size()} tokens -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
