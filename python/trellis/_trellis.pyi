"""Type stubs of the native module ``trellis._trellis`` (re-exported by ``trellis``)."""

import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

StrPath = Union[str, "os.PathLike[str]"]
#: A message: its text, or ``{"speaker" | "sender": str, "text" | "message": str}``.
Message = Union[str, Dict[str, Any]]
History = Sequence[Message]
#: A triple of given knowledge: ``[head, relation, tail]`` in walking order (``~relation``
#: walks a fact backwards) or ``{"head", "relation", "tail", "reverse"}``.
Triple = Union[Sequence[str], Dict[str, Any]]
Knowledge = Sequence[Sequence[Triple]]
#: ``{"work", "step", "steps", "stage", "done", "total", "unit", "facts"}`` (``trellis::Progress``).
ProgressCallback = Callable[[Dict[str, Any]], Any]

from .types import Answer, Generated, Mention, Reply

__version__: str
build: str

class Store:
    """A Trellis store directory. ``Store(path)`` opens it read-only."""

    def __init__(self, path: StrPath, read_only: bool = True) -> None: ...
    @staticmethod
    def open(path: StrPath) -> "Store":
        """Opens for reading and writing (holds the writer lock until closed)."""
    @staticmethod
    def open_read_only(path: StrPath) -> "Store":
        """Opens for reading only (any number of readers, also during a load)."""
    @property
    def path(self) -> str: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def entity_count(self) -> int: ...
    @property
    def relation_count(self) -> int: ...
    def stats(self) -> Dict[str, Any]:
        """Counts, format, loads, sizes and token indexes (``trellis stats --json``)."""
    def entity(self, what: Union[str, int]) -> List[Dict[str, Any]]:
        """The entities ``what`` names: ``{"id", "kind", "key", "name", "aliases",
        "out_degree", "in_degree", "matched"}`` each; empty when none."""
    def search(self, text: str, top: int = 10, exact: bool = False) -> List[Dict[str, Any]]:
        """Entities whose text-index documents best match ``text`` (``trellis search --json``'s hits)."""
    def neighbors(self, entity: Union[str, int], relation: Optional[str] = None, hops: int = 1, limit: int = 100) -> List[Dict[str, Any]]:
        """Facts around the entity: ``{"start", "head", "relation", "tail", "reverse", "hop"}``."""
    def validate(self) -> Dict[str, Any]:
        """Checks every index against every other (``"problems"`` empty when sound)."""
    @property
    def generation(self) -> int:
        """The generation this handle reads; every write commits the next one."""
    def refresh(self) -> bool:
        """Moves to the newest generation when one was committed since (``True`` if it moved)."""
    def update(
        self,
        changes: Optional[Sequence[Dict[str, Any]]] = None,
        add: Optional[Union[StrPath, Sequence[StrPath]]] = None,
        retract: Optional[Union[StrPath, Sequence[StrPath]]] = None,
        format: Optional[str] = None,
        delete: Optional[Union[str, Sequence[str]]] = None,
        rename: Optional[Union[Dict[str, str], Sequence[Tuple[str, str]]]] = None,
        alias: Optional[Union[Dict[str, str], Sequence[Tuple[str, str]]]] = None,
        unalias: Optional[Union[Dict[str, str], Sequence[Tuple[str, str]]]] = None,
        retract_source: Optional[Union[str, Sequence[str]]] = None,
        source: Optional[str] = None,
        on_error: str = "stop",
        lang: str = "en",
        progress: Optional[ProgressCallback] = None,
    ) -> Dict[str, Any]:
        """``trellis.update`` on this store, then ``refresh()``; the update report."""
    def close(self) -> None:
        """Lets go of the store (a writer's lock too); later reads raise ``ValueError``."""
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> "Store": ...
    def __exit__(self, *_exc: Any) -> bool: ...

class Linker:
    """Entity linking against one store; ``options``: window, max_ngram, max_entities,
    min_word_chars, decay, rewrite (resolve pronouns and references by the graph)."""

    def __init__(self, store: Union[Store, StrPath], **options: Any) -> None: ...
    @property
    def store(self) -> Store: ...
    def link(self, what: Union[str, History]) -> List[Mention]:
        """Mentions: ``{"message", "speaker", "start", "end", "char_start", "char_end",
        "text", "kind", "entities": [{"id", "name", "degree"}]}``."""

class FactChecker:
    """Judges replies against one store (``trellis check``): ``checker`` a fact checker's
    directory (models/check-opendialkg) or file; ``options`` the linker's."""

    def __init__(self, store: Union[Store, StrPath], checker: Optional[StrPath] = None, **options: Any) -> None: ...
    @property
    def store(self) -> Store: ...
    def check(self, history: History, reply: str) -> Dict[str, Any]:
        """``{"fact_score", "neip", "supported", "refuted", "not_enough_info", "claims": [{"sentence",
        "subject", "object", "phrase", "relations", "verdict", "evidence"}]}``."""

class Retriever:
    """A retriever (``"all"``, ``"random"``, ``"bm25"``, ``"katz"``, ``"pcst"``, ``"gsr"``,
    ``"dense"``, ``"surge"``, ``"search"``) over one store; ``options`` are ``trellis retrieve``'s flags without dashes."""

    def __init__(
        self, store: Union[Store, StrPath], kind: str, model: Optional[StrPath] = None, top: int = 10, refresh: str = "manual", **options: Any
    ) -> None:
        """``refresh="auto"``: before each call, move to the newest generation of the store."""
    @property
    def kind(self) -> str: ...
    @property
    def model(self) -> Optional[str]: ...
    @property
    def store(self) -> Store: ...
    @property
    def batch_size(self) -> int: ...
    def refresh(self) -> bool:
        """Moves to the newest generation of its store (models kept; ``True`` if it moved)."""
    def retrieve(self, history: History, top: Optional[int] = None, entities: Optional[List[str]] = None) -> Answer:
        """``{"mentioned": [names], "paths": [{"score", "explanation", "triples"}]}``."""
    def retrieve_batch(
        self,
        histories: Sequence[Union[History, Dict[str, Any]]],
        top: Optional[int] = None,
        on_error: str = "stop",
        progress: Optional[ProgressCallback] = None,
    ) -> List[Optional[Answer]]:
        """One answer per history or request dict ``{"id", "history", "entities"}``, in order."""

class Generator:
    """A reply generator (an exported model directory); ``settings`` override its
    ``trellis.json`` (strategy, beams, return_sequences, max_new_tokens, temperature, ...)."""

    def __init__(self, model: StrPath, **options: Any) -> None: ...
    @property
    def model(self) -> str: ...
    def generate(self, history: History, knowledge: Optional[Knowledge] = None, seed: Optional[int] = None) -> Generated:
        """``{"text", "tokens", "score", "finish"}`` (and ``"responses"`` when several)."""
    def generate_batch(
        self,
        requests: Sequence[Union[History, Dict[str, Any]]],
        knowledge: Optional[Knowledge] = None,
        seed: Optional[int] = None,
        progress: Optional[ProgressCallback] = None,
    ) -> List[Generated]: ...

class Pipeline:
    """Link, retrieve, generate. Retriever options as ``Retriever`` takes them, generator
    settings prefixed ``gen_``; ``top`` paths handed to the generator; ``batch`` requests
    together."""

    def __init__(
        self,
        store: Union[Store, StrPath],
        retriever: str = "gsr",
        model: Optional[StrPath] = None,
        generator: Optional[StrPath] = None,
        top: int = 3,
        refresh: str = "manual",
        **options: Any,
    ) -> None: ...
    def refresh(self) -> bool:
        """Moves the retriever to the newest generation of its store (``True`` if it moved)."""
    def respond(self, history: Union[History, Dict[str, Any]], knowledge: Optional[Knowledge] = None, seed: Optional[int] = None) -> Reply:
        """``{"response", "mentioned", "knowledge", "paths", "timings"}``."""
    def respond_batch(
        self, requests: Sequence[Union[History, Dict[str, Any]]], on_error: str = "stop", progress: Optional[ProgressCallback] = None
    ) -> List[Optional[Reply]]: ...

def ingest(
    store: Union[Store, StrPath],
    files: Union[StrPath, Sequence[StrPath]],
    format: Optional[str] = None,
    compression: Optional[str] = None,
    on_error: str = "stop",
    rejects: Optional[StrPath] = None,
    memory_mb: int = 1024,
    threads: Optional[int] = None,
    reverse_prefix: str = "~",
    lang: str = "en",
    progress: Optional[ProgressCallback] = None,
    source: Optional[str] = None,
) -> Dict[str, Any]:
    """Loads triple files into the store as one new generation; the load report."""

def index_tokens(
    store: Union[Store, StrPath],
    tokenizer: StrPath,
    name: Optional[str] = None,
    linearization: str = "trellis",
    progress: Optional[ProgressCallback] = None,
) -> Dict[str, Any]:
    """Builds the token index of a model's tokenizer in the store; its record."""

def index_text(
    store: Union[Store, StrPath],
    documents: Optional[StrPath] = None,
    on_error: str = "stop",
    progress: Optional[ProgressCallback] = None,
) -> Dict[str, Any]:
    """Builds the store's text index (one document per entity, with the texts of a
    ``documents`` JSON-lines file of ``{"title", "text"}``); ``{"record", "documents", "texts"}``."""

def index_vectors(
    store: Union[Store, StrPath],
    dense_model: StrPath,
    progress: Optional[ProgressCallback] = None,
    **options: Any,
) -> Dict[str, Any]:
    """Writes the store's vectors of a bi-encoder (every entity name and fact), read by
    ``dense_paths="facts"`` and PCST's dense prizes; ``{"path", "header", "bytes"}``."""

def update(
    store: Union[Store, StrPath],
    changes: Optional[Sequence[Dict[str, Any]]] = None,
    add: Optional[Union[StrPath, Sequence[StrPath]]] = None,
    retract: Optional[Union[StrPath, Sequence[StrPath]]] = None,
    format: Optional[str] = None,
    delete: Optional[Union[str, Sequence[str]]] = None,
    rename: Optional[Union[Dict[str, str], Sequence[Tuple[str, str]]]] = None,
    alias: Optional[Union[Dict[str, str], Sequence[Tuple[str, str]]]] = None,
    unalias: Optional[Union[Dict[str, str], Sequence[Tuple[str, str]]]] = None,
    retract_source: Optional[Union[str, Sequence[str]]] = None,
    source: Optional[str] = None,
    on_error: str = "stop",
    lang: str = "en",
    progress: Optional[ProgressCallback] = None,
) -> Dict[str, Any]:
    """Changes the store in one atomic commit (``trellis update``); the update report."""

def check_settings(component: str, kind: Optional[str] = None, **options: Any) -> None:
    """The library's check of settings alone (no store, no model): ``"linker"``,
    ``"retriever"`` or ``"pipeline"``; raises ``SettingError``."""

def evaluate_retrieval(
    retriever: Retriever,
    dialogs: StrPath,
    dataset: str = "opendialkg",
    actions: str = "all",
    k: Optional[Sequence[int]] = None,
    max_turns: Optional[int] = None,
    progress: Optional[ProgressCallback] = None,
) -> Dict[str, Any]:
    """``trellis eval retrieval --json`` of the retriever on the dialogs' gold turns."""

def _score(
    predictions: List[str],
    references: List[str],
    knowledge: Optional[List[Optional[str]]] = None,
    entities: Optional[List[Optional[List[str]]]] = None,
) -> Dict[str, Any]: ...
