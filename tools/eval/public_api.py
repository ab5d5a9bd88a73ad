#!/usr/bin/env python3
"""The library's public API from its rustdoc output: counted, listed, and checked against the
committed snapshot `docs/api-surface.txt`, so that a change of the surface is deliberate and
reviewed (tools/test.sh runs the check, so CI does):

    RUSTDOCFLAGS="-D warnings" cargo doc --release --locked --no-deps
    python3 tools/eval/public_api.py "$CARGO_TARGET_DIR/doc/trellis"              # counts
    python3 tools/eval/public_api.py --list "$CARGO_TARGET_DIR/doc/trellis"       # one item a line
    python3 tools/eval/public_api.py --check docs/api-surface.txt "$CARGO_TARGET_DIR/doc/trellis"
    python3 tools/eval/public_api.py --write docs/api-surface.txt "$CARGO_TARGET_DIR/doc/trellis"

What is counted and listed: public modules (each page `index.html`), items with a page of
their own (structs, enums, traits, functions, type aliases, constants, statics, macros), and
on each type's page its inherent methods, its variants and its public fields (trait
implementations are left out: a derived `Clone` is not surface). Only what rustdoc shows:
items of private modules that nothing re-exports are not reachable, hence not listed; the
redirect pages rustdoc leaves at a re-exported item's private home are left out too. A line
is `KIND PATH` (`struct trellis::store::Store`, `method trellis::store::Store::open`).
"""
import collections
import difflib
import os
import re
import sys

PAGE = re.compile(r"(struct|enum|trait|fn|type|constant|static|macro|union)\.(.+)\.html$")


def items(root):
    """Every public item as (kind, path), sorted."""
    out = set()
    base = os.path.dirname(os.path.abspath(root))
    for folder, _, files in os.walk(root):
        module = os.path.relpath(folder, base).replace(os.sep, "::")
        if "index.html" in files:
            out.add(("module", module))
        for f in files:
            m = PAGE.match(f)
            if not m:
                continue
            page = open(os.path.join(folder, f), encoding="utf-8").read()
            if "<title>Redirection</title>" in page:
                continue
            path = f"{module}::{m.group(2)}"
            out.add((m.group(1), path))
            if m.group(1) in ("struct", "enum", "trait", "union"):
                own = re.split(r'id="(?:trait-implementations|synthetic-implementations|blanket-implementations)"', page)[0]
                for anchor, name in (("method", "method"), ("variant", "variant"), ("structfield", "field")):
                    for member in set(re.findall(rf'id="{anchor}\.(\w+)"', own)):
                        out.add((name, f"{path}::{member}"))
    return sorted(out, key=lambda kp: (kp[1], kp[0]))


def listing(root):
    return [f"{kind} {path}" for kind, path in items(root)]


def counts(root):
    return collections.Counter(kind for kind, _ in items(root))


def main(argv):
    mode = "count"
    if argv and argv[0] in ("--list", "--check", "--write"):
        mode = argv.pop(0)[2:]
    snapshot = argv.pop(0) if mode in ("check", "write") and argv else None
    if len(argv) != 1 or not os.path.isdir(argv[0]) or (mode in ("check", "write") and not snapshot):
        sys.exit("usage: public_api.py [--list | --check SNAPSHOT | --write SNAPSHOT] TARGET/doc/trellis (run `cargo doc --no-deps` first)")
    root = argv[0]
    if mode == "count":
        k = counts(root)
        n_items = sum(v for n, v in k.items() if n not in ("method", "variant", "field"))
        print(f"modules {k['module']}, items {n_items} (modules included), inherent methods {k['method']}, variants {k['variant']}, public fields {k['field']}")
        for n in sorted(k):
            print(f"  {n}: {k[n]}")
        return 0
    lines = listing(root)
    if mode == "list":
        print("\n".join(lines))
        return 0
    if mode == "write":
        with open(snapshot, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{snapshot}: {len(lines)} items")
        return 0
    want = open(snapshot, encoding="utf-8").read().splitlines()
    if want == lines:
        print(f"public API: {len(lines)} items, as {snapshot} says")
        return 0
    diff = list(difflib.unified_diff(want, lines, snapshot, "the built docs", lineterm="", n=0))
    print("\n".join(diff))
    print(
        f"\nThe public API differs from {snapshot} ({len(want)} -> {len(lines)} items). If the change is meant, "
        f"write the snapshot again (python3 tools/eval/public_api.py --write {snapshot} TARGET/doc/trellis) and commit it with the change.",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
