#!/usr/bin/env python3
"""Train the test fixture tokenizer: a T5-style SentencePiece Unigram model (Metaspace
pre-tokenizer, `<pad>`, `</s>`, `<unk>` as ids 0-2) with the special tokens of the path
linearization added, on the names and dialogs of the bundled sample data.

Offline and deterministic:

    pip install tokenizers==0.23.3      # the version that made the committed file
    python3 tools/reference/tokenizer_fixture.py tests/fixtures/opendialkg-sample.tsv tests/fixtures/tokenizer.json --force

The committed tokenizer is frozen (token indexes and tests were made with it): without
`--force` it refuses to write over an existing file.

Real retrievers bring their own exported tokenizer.json; this one only has to behave like
T5's (same pre-tokenizer and special-token handling) so the token index is tested on it.
"""
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

# The boundary tokens of both linearization presets (src/linearize.rs): `trellis`
# ([Head] e1 [Int1] r1 [Int2] e2 ... [Tail], [RevN] for reversed edges, [SEP]) and `dialoggsr`
# (the DialogGSR authors' 18: [HEAD], [Int1_1][Int1_2] ... [Rev4_2], [TAIL]). Appended in this
# order, so the ids of the earlier ones never move (ids 1200-1228 on the fixture).
LINEARIZATION_TOKENS = (
    ["[Head]", "[Int1]", "[Int2]", "[Int3]", "[Int4]", "[Rev1]", "[Rev2]", "[Tail]", "[SEP]", "[Rev3]", "[Rev4]", "[HEAD]"]
    + [f"[{kind}{n}_{j}]" for kind in ("Int", "Rev") for n in range(1, 5) for j in (1, 2)]
    + ["[TAIL]"]
)


def corpus(path):
    """Names as they appear in paths: lowercased, `_` and `-` of relations as spaces."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 3:
                continue
            s, r, o = cols
            r = r.lstrip("~").replace("_", " ").replace("-", " ")
            yield f"{s.lower()} {r.lower()} {o.lower()}"


def main(sample, out):
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(
        vocab_size=1200,
        special_tokens=["<pad>", "</s>", "<unk>"],
        unk_token="<unk>",
        shrinking_factor=0.75,
        max_piece_length=16,
        n_sub_iterations=2,
    )
    tok.train_from_iterator(list(corpus(sample)), trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in LINEARIZATION_TOKENS])
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))]
    )
    tok.save(out, pretty=False)
    print(f"{out}: vocabulary {tok.get_vocab_size()}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--force"]
    if len(args) != 2:
        sys.exit("usage: tokenizer_fixture.py SAMPLE.tsv OUT.json [--force]")
    if os.path.exists(args[1]) and "--force" not in sys.argv:
        sys.exit(f"tokenizer_fixture.py: {args[1]} exists: a frozen fixture (the tests were made with it); --force rewrites it")
    main(*args)
