"""What pickled handles are rebuilt with (each handle's ``__reduce__`` names one)."""

from typing import Any, Dict, Optional

from . import _trellis


def linker(store: "_trellis.Store", options: Dict[str, Any]) -> "_trellis.Linker":
    return _trellis.Linker(store, **options)


def fact_checker(store: "_trellis.Store", checker: Optional[str], options: Dict[str, Any]) -> "_trellis.FactChecker":
    return _trellis.FactChecker(store, checker, **options)


def retriever(store: "_trellis.Store", kind: str, model: Optional[str], options: Dict[str, Any]) -> "_trellis.Retriever":
    return _trellis.Retriever(store, kind, model=model, **options)


def generator(model: str, options: Dict[str, Any]) -> "_trellis.Generator":
    return _trellis.Generator(model, **options)


def pipeline(store: "_trellis.Store", args: Dict[str, Any]) -> "_trellis.Pipeline":
    return _trellis.Pipeline(store, **args)
