"""Trellis: an embedded knowledge-graph store and retrieval engine for knowledge-grounded
dialog, from Python.

>>> import trellis
>>> trellis.ingest("kg", ["kg.tsv"])                       # a store from a triples file
>>> store = trellis.Store.open_read_only("kg")
>>> store.entity("jordan spieth")[0]["name"]
>>> retriever = trellis.Retriever(store, "pcst")
>>> retriever.retrieve(["Do you know Jordan Spieth?"])["paths"][0]["triples"]

Every call that reads the store, retrieves, generates or loads releases the GIL. Results
are plain dicts and lists, in the JSON shapes the ``trellis`` command line writes
(:func:`trellis.arrow.table` makes a batch's a pyarrow Table). Errors
are :mod:`trellis.errors` classes, rooted at :class:`TrellisError`. Handles pickle as
what reopens them (paths and options).
"""

from . import arrow, metrics, types
from ._trellis import (
    FactChecker,
    Generator,
    Linker,
    Pipeline,
    Retriever,
    Store,
    __version__,
    build,
    check_settings,
    evaluate_retrieval,
    index_text,
    index_tokens,
    index_vectors,
    ingest,
    update,
)
from .errors import BadInputError, CancelledError, ModelError, SettingError, StoreError, TrellisError

__all__ = [
    "Store",
    "Linker",
    "FactChecker",
    "Retriever",
    "Generator",
    "Pipeline",
    "ingest",
    "index_tokens",
    "index_text",
    "index_vectors",
    "update",
    "evaluate_retrieval",
    "check_settings",
    "metrics",
    "types",
    "arrow",
    "TrellisError",
    "BadInputError",
    "SettingError",
    "StoreError",
    "ModelError",
    "CancelledError",
    "__version__",
    "build",
]
