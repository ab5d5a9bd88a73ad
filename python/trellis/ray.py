"""Batch retrieval and replies on a Ray cluster, with Ray Data.

A Ray Dataset of requests (rows ``{"id", "history", "entities", "knowledge", "seed"}`` as
``trellis retrieve`` and ``trellis run`` read them, from JSON lines or Parquet) is mapped to
answers by ``map_batches`` with a callable class: each actor opens the store read-only and
loads its models once, then answers batches. Only paths and options travel to the actors.

>>> import ray, trellis.ray
>>> ds = ray.data.read_json("requests.jsonl")
>>> answers = trellis.ray.retrieve(ds, "kg", "gsr", model="models/gsr-opendialkg", actors=2)
>>> answers.take(1)   # [{"id": ..., "answer": '{"id": ..., "mentioned": [...], "paths": [...]}', "error": None}]

Each output row is ``{"id", "answer", "error"}``: ``answer`` the JSON text of the answer the
command line writes (kept as text so that rows stay compact and of one schema whatever the
paths), ``error`` None, or with ``on_error="skip"`` what is wrong with a bad request (its
``answer`` then None). No row is lost or duplicated: one output row per input row.

From the shell: ``python -m trellis.ray retrieve|respond --store DIR --input IN --output OUT
--actors N`` (``python -m trellis.ray --help``).
"""

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional

__all__ = ["retrieve", "respond", "Answerer"]


def _plain(x: Any) -> Any:
    """A value of a Ray batch as plain Python (numpy arrays and scalars, nested)."""
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items() if v is not None}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


class Answerer:
    """The callable class of ``map_batches``: opens the store and the models once per
    actor, answers a batch (a dict of columns) per call."""

    def __init__(
        self,
        task: str,
        store: str,
        retriever: str,
        model: Optional[str],
        generator: Optional[str],
        top: int,
        options: Dict[str, Any],
        threads: Optional[int],
        on_error: str,
    ) -> None:
        if threads:
            # The native module's thread pool reads it when first used (in this actor).
            os.environ["RAYON_NUM_THREADS"] = str(threads)
        import trellis

        self.task = task
        self.on_error = on_error
        store_handle = trellis.Store.open_read_only(store)
        if task == "retrieve":
            self.handle = trellis.Retriever(store_handle, retriever, model=model, top=top, **options)
        elif task == "respond":
            self.handle = trellis.Pipeline(store_handle, retriever, model=model, generator=generator, top=top, **options)
        else:
            raise ValueError(f"task must be 'retrieve' or 'respond', not {task!r}")

    def _answer(self, requests: List[Dict[str, Any]], on_error: str) -> List[Optional[Dict[str, Any]]]:
        if self.task == "retrieve":
            return self.handle.retrieve_batch(requests, on_error=on_error)
        return self.handle.respond_batch(requests, on_error=on_error)

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, List[Any]]:
        import trellis

        columns = {k: list(v) for k, v in batch.items()}
        n = len(next(iter(columns.values()), []))
        requests = []
        for i in range(n):
            row = {k: _plain(v[i]) for k, v in columns.items() if v[i] is not None}
            requests.append({k: row[k] for k in ("id", "history", "entities", "knowledge", "seed") if k in row})
        answers = self._answer(requests, self.on_error)
        out: Dict[str, List[Any]] = {"id": [], "answer": [], "error": []}
        for request, answer in zip(requests, answers):
            out["id"].append(json.dumps(request.get("id")))
            error = None
            if answer is None:
                # Skipped: ask again alone for what is wrong with it.
                try:
                    self._answer([request], "stop")
                    error = "no answer"
                except trellis.BadInputError as e:
                    error = str(e).replace("request 0: ", "", 1)
            out["answer"].append(None if answer is None else json.dumps(answer, ensure_ascii=False))
            out["error"].append(error)
        return out


def _map(ds: Any, task: str, store: Any, retriever: str, model: Any, generator: Any, top: int, actors: int, batch_size: int, threads: Optional[int], on_error: str, options: Dict[str, Any]) -> Any:
    import ray.data

    if on_error not in ("stop", "skip"):
        raise ValueError(f"on_error must be 'stop' or 'skip', not {on_error!r}")
    args = dict(
        task=task,
        store=os.fspath(store),
        retriever=retriever,
        model=None if model is None else os.fspath(model),
        generator=None if generator is None else os.fspath(generator),
        top=top,
        options=options,
        threads=threads,
        on_error=on_error,
    )
    return ds.map_batches(
        Answerer,
        fn_constructor_kwargs=args,
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=threads or 1,
    )


def retrieve(ds: Any, store: Any, retriever: str = "pcst", *, model: Any = None, top: int = 10, actors: int = 1, batch_size: int = 64, threads: Optional[int] = None, on_error: str = "stop", **options: Any) -> Any:
    """Maps a Dataset of ``trellis retrieve`` requests to ``{"id", "answer", "error"}`` rows
    on ``actors`` actors, each answering ``batch_size`` rows per call with ``threads``
    threads (default: one per CPU the actor is given, which is ``threads or 1``).
    ``options`` as ``trellis.Retriever`` takes them. ``on_error="stop"`` fails the job on
    a bad request; ``"skip"`` reports it in its row's ``error``."""
    return _map(ds, "retrieve", store, retriever, model, None, top, actors, batch_size, threads, on_error, options)


def respond(ds: Any, store: Any, retriever: str = "gsr", *, model: Any = None, generator: Any = None, top: int = 3, actors: int = 1, batch_size: int = 16, threads: Optional[int] = None, on_error: str = "stop", **options: Any) -> Any:
    """As :func:`retrieve`, for the whole chain (``trellis.Pipeline``): ``answer`` is
    ``trellis run``'s answer line."""
    return _map(ds, "respond", store, retriever, model, generator, top, actors, batch_size, threads, on_error, options)


def _read(path: str) -> Any:
    import ray.data

    if path.endswith(".parquet") or os.path.isdir(path):
        return ray.data.read_parquet(path)
    return ray.data.read_json(path, lines=True)


def _option(text: str) -> Any:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--option takes KEY=VALUE, not {text!r}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trellis.ray", description="Batch retrieval or replies on Ray Data.")
    p.add_argument("task", choices=["retrieve", "respond"])
    p.add_argument("--store", required=True, help="the store directory (shared storage, or the same path on every node)")
    p.add_argument("--input", required=True, help="requests: JSON lines, or Parquet (.parquet or a directory)")
    p.add_argument("--output", required=True, help="answers: a JSON-lines file, or a Parquet directory (ending in .parquet)")
    p.add_argument("--retriever", default=None, help="all, random, bm25, katz, pcst or gsr (default: pcst for retrieve, gsr for respond)")
    p.add_argument("--model", help="gsr: the retriever's model directory")
    p.add_argument("--generator", help="respond: the generator's model directory")
    p.add_argument("--top", type=int, default=None)
    p.add_argument("--actors", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--threads", type=int, default=None, help="threads per actor")
    p.add_argument("--on-error", choices=["stop", "skip"], default="stop")
    p.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE", help="a retriever or pipeline option (repeatable)")
    p.add_argument("--address", default=None, help="the Ray cluster's address (default: a local one)")
    args = p.parse_args(argv)

    import ray

    ray.init(address=args.address, ignore_reinit_error=True, log_to_driver=False)
    ds = _read(args.input)
    if args.actors * (args.threads or 1) >= ray.cluster_resources().get("CPU", 0):
        # The actors would hold every CPU and leave none to the read tasks feeding them:
        # read the input first.
        ds = ds.materialize()
    common = dict(model=args.model, actors=args.actors, threads=args.threads, on_error=args.on_error, **dict(args.option))
    if args.top is not None:
        common["top"] = args.top
    if args.batch_size is not None:
        common["batch_size"] = args.batch_size
    if args.task == "retrieve":
        out = retrieve(ds, args.store, args.retriever or "pcst", **common)
    else:
        out = respond(ds, args.store, args.retriever or "gsr", generator=args.generator, **common)
    answered = skipped = 0
    if args.output.endswith(".parquet"):
        out.write_parquet(args.output)
        for row in out.iter_rows():
            answered += row["error"] is None
            skipped += row["error"] is not None
    else:
        tmp = args.output + ".partial"
        with open(tmp, "w", encoding="utf-8") as f:
            for row in out.iter_rows():
                if row["error"] is not None:
                    print(f"request {row['id']}: {row['error']} (skipped)", file=sys.stderr)
                    skipped += 1
                    continue
                f.write(row["answer"] + "\n")
                answered += 1
        os.replace(tmp, args.output)
    print(f"answered {answered} requests" + (f", skipped {skipped}" if skipped else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
