"""A typed use of trellis, checked by mypy against the package's stubs and types
(python/tests/test_types.py): a wrong key or type in here fails the check."""

from typing import List, Optional

import trellis
from trellis.types import Answer, Generated, Mention, Reply


def best_triple(answer: Answer) -> Optional[str]:
    for path in answer["paths"]:
        t = path["triples"][0]
        return f"{t['head']} -{t['relation']}-> {t['tail']}" + (" (reversed)" if t["reverse"] else "")
    return None


def mentions(store: trellis.Store, text: str) -> List[str]:
    found: List[Mention] = trellis.Linker(store).link(text)
    return [m["text"] + ":" + m["entities"][0]["name"] for m in found if m["entities"]]


def reply_text(pipeline: trellis.Pipeline, history: List[str]) -> str:
    reply: Reply = pipeline.respond(history)
    total: float = reply["timings"]["link_ms"] + reply["timings"]["retrieve_ms"]
    return f"{reply['response']} ({total:.1f} ms)"


def generated(generator: trellis.Generator) -> int:
    g: Generated = generator.generate(["hi"], knowledge=[[["A", "r", "B"]]])
    return len(g["tokens"])


def batch(retriever: trellis.Retriever) -> int:
    answers: List[Optional[Answer]] = retriever.retrieve_batch([["Jordan Spieth"]], on_error="skip")
    return sum(len(a["paths"]) for a in answers if a is not None)
