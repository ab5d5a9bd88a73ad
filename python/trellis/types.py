"""The shapes of trellis's answers, as TypedDicts for type checkers (the values are plain
dicts and lists, in the JSON shapes the command line writes): ``Retriever.retrieve`` gives an
:class:`Answer`, ``Linker.link`` a list of :class:`Mention`, ``Generator.generate`` a
:class:`Generated`, ``Pipeline.respond`` a :class:`Reply`. ``python/tests/test_types.py``
checks them against real outputs, and runs mypy on a typed use of the package."""

from typing import Any, Dict, List, TypedDict

__all__ = ["StoredTriple", "Path", "Answer", "LinkedEntity", "Resolution", "Mention", "Generated", "Sequence_", "Timings", "ReplyPath", "Reply"]


class StoredTriple(TypedDict):
    """A fact as an answer writes it: as stored, and whether the path walks it backwards."""

    head: str
    relation: str
    tail: str
    reverse: bool

class _PathRequired(TypedDict):
    score: float
    explanation: str
    triples: List[StoredTriple]

class Path(_PathRequired, total=False):
    """A retrieved path (``tokens``: a generated path's tokens, with ``explain``)."""

    tokens: List[Dict[str, Any]]

class _AnswerRequired(TypedDict):
    mentioned: List[str]
    paths: List[Path]

class Answer(_AnswerRequired, total=False):
    """``Retriever.retrieve``'s answer (``id`` when the request dict had one)."""

    id: Any

class LinkedEntity(TypedDict):
    id: int
    name: str
    degree: int

class Resolution(TypedDict):
    """Why the rewrite resolved a pronoun or reference (``rewrite=True``) to its entity."""

    agreement: str
    agreed: List[List[str]]
    messages_back: int
    possessive: bool
    also_agreed: List[int]

class _MentionRequired(TypedDict):
    message: int
    speaker: str
    start: int
    end: int
    char_start: int
    char_end: int
    text: str
    kind: str
    entities: List[LinkedEntity]

class Mention(_MentionRequired, total=False):
    """A mention ``Linker.link`` found (``start``/``end`` in UTF-8 bytes, ``char_*`` in
    characters; ``resolution`` for a word the rewrite resolved, ``kind`` ``"resolved"``)."""

    resolution: Resolution

class Sequence_(TypedDict):
    text: str
    score: float
    finish: str

class _GeneratedRequired(TypedDict):
    text: str
    tokens: List[int]
    score: float
    finish: str

class Generated(_GeneratedRequired, total=False):
    """``Generator.generate``'s reply (``responses`` when several were asked for)."""

    responses: List[Dict[str, Any]]

class Timings(TypedDict):
    link_ms: float
    retrieve_ms: float
    generate_ms: float
    batch: int

class ReplyPath(TypedDict):
    score: float
    triples: List[StoredTriple]

class _ReplyRequired(TypedDict):
    response: str
    mentioned: List[str]
    knowledge: List[List[List[str]]]
    timings: Timings

class Reply(_ReplyRequired, total=False):
    """``Pipeline.respond``'s answer (``paths`` when retrieved, ``responses`` when several,
    ``id`` when the request dict had one)."""

    paths: List[ReplyPath]
    responses: List[Sequence_]
    id: Any
