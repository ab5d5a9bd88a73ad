#!/usr/bin/env python3
"""Counts the library's public API from its rustdoc output, so the size of the surface can be
compared between commits (issue 20 reports it before and after sealing):

    RUSTDOCFLAGS="-D warnings" cargo doc --release --locked --no-deps
    python3 tools/eval/public_api.py "$CARGO_TARGET_DIR/doc/trellis"

What is counted: public modules (each page `index.html`), items with a page of their own
(structs, enums, traits, functions, type aliases, constants, statics, macros), and on each
type's page its inherent methods, its variants and its public fields (trait implementations
are left out: a derived `Clone` is not surface). Only what rustdoc shows: items of private
modules that nothing re-exports are not reachable, hence not counted; the redirect pages
rustdoc leaves at a re-exported item's private home are not counted either (before
2026-11-26's sealing of `decode` they were: each item re-exported out of a private module
counted twice).
"""
import collections
import os
import re
import sys


def count(root):
    kinds = collections.Counter()
    for folder, _, files in os.walk(root):
        if "index.html" in files:
            kinds["module"] += 1
        for f in files:
            m = re.match(r"(struct|enum|trait|fn|type|constant|static|macro|union)\.(.+)\.html$", f)
            if not m:
                continue
            page = open(os.path.join(folder, f), encoding="utf-8").read()
            if "<title>Redirection</title>" in page:
                continue
            kinds[m.group(1)] += 1
            if m.group(1) in ("struct", "enum", "trait", "union"):
                own = re.split(r'id="(?:trait-implementations|synthetic-implementations|blanket-implementations)"', page)[0]
                for anchor, name in (("method", "method"), ("variant", "variant"), ("structfield", "field")):
                    kinds[name] += len(set(re.findall(rf'id="{anchor}\.(\w+)"', own)))
    return kinds


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: public_api.py TARGET/doc/trellis (run `cargo doc --no-deps` first)")
    k = count(sys.argv[1])
    items = sum(v for n, v in k.items() if n not in ("method", "variant", "field"))
    print(f"modules {k['module']}, items {items} (modules included), inherent methods {k['method']}, variants {k['variant']}, public fields {k['field']}")
    for n in sorted(k):
        print(f"  {n}: {k[n]}")


if __name__ == "__main__":
    main()
