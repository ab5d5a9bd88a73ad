"""Batch answers as a pyarrow Table (pyarrow is optional: ``pip install pyarrow``).

>>> answers = retriever.retrieve_batch(requests)
>>> table = trellis.arrow.table(answers)        # one row per request, nested columns
>>> table.column("paths")                       # list<struct<score, triples: list<struct>>>

The rows are the answers as they are (the command line's JSON shapes): nested paths become
list and struct columns, a request answered by an error under ``on_error="skip"`` (``None``)
a row of nulls, so row *i* stays request *i*. Writing Parquet from it:
``pyarrow.parquet.write_table(table, "answers.parquet")``.
"""

from typing import Any, Dict, List, Optional, Sequence

__all__ = ["table"]


def table(answers: Sequence[Optional[Dict[str, Any]]]) -> Any:
    """A ``pyarrow.Table`` of ``answers`` (a batch call's list): one row per answer, in
    order; a ``None`` answer a row of nulls. Raises ImportError without pyarrow."""
    try:
        import pyarrow
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("trellis.arrow needs pyarrow (pip install pyarrow)") from e
    rows: List[Optional[Dict[str, Any]]] = list(answers)
    if not rows:
        return pyarrow.table({})
    keys: Dict[str, None] = {}
    for r in rows:
        if r is not None:
            keys.update(dict.fromkeys(r))
    # A skipped request: every column null, so that the row count and order stay the input's.
    return pyarrow.Table.from_pylist([r if r is not None else dict.fromkeys(keys) for r in rows])
