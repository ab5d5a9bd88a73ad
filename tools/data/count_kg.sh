#!/usr/bin/env bash
# The Tests table's counts, independently of Trellis: facts, entities and relations of a
# TSV (`s \t r \t o`) or pipe (`h|r|t`) graph, with awk alone, the way a load counts them:
# lines without three fields or with an empty field dropped, relations starting with `~`
# folded into their reverse (`~r(a, b)` is `r(b, a)`), duplicate facts counted once.
#
#   bash tools/data/count_kg.sh ../shared/data/opendialkg/kg.tsv       # 217574 71499 590
#   bash tools/data/count_kg.sh ../shared/data/metaqa/kb.txt '|'       # 129235 42778 9
set -euo pipefail
file="$1"
sep="${2:-	}"
LC_ALL=C awk -F"$sep" '
    NF != 3 || $1 == "" || $2 == "" || $3 == "" { next }
    {
        s = $1; r = $2; o = $3
        if (substr(r, 1, 1) == "~") { r = substr(r, 2); t = s; s = o; o = t }
        fact = s SUBSEP r SUBSEP o
        if (!(fact in facts)) { facts[fact] = 1; nf++ }
        if (!(s in ents)) { ents[s] = 1; ne++ }
        if (!(o in ents)) { ents[o] = 1; ne++ }
        if (!(r in rels)) { rels[r] = 1; nr++ }
    }
    END { print "facts", nf, "entities", ne, "relations", nr }
' "$file"
