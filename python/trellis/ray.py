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
``answer`` then None). No row is lost or duplicated: one output row per input row. With
``on_error="stop"`` the first bad request fails the job with a ``BadInputError`` naming the
request by its ``id`` (or its input line).

From the shell: ``python -m trellis.ray retrieve|respond --store DIR --input IN --output OUT
--actors N`` (``python -m trellis.ray --help``). As ``trellis retrieve`` does: a JSON-lines
input is read line by line, so a line that is not JSON is reported with its number (skipped
or stopping the job, as ``--on-error`` says) and the others are answered; each answer line
carries its input ``line``; bad settings are refused before Ray starts (exit 2), bad input
stops the job with exit 65, anything else with exit 1.
"""

import argparse
import json
import os
import re
import sys
import warnings
from typing import Any, Dict, List, Optional, Tuple

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

    def _answer(self, requests: List[Dict[str, Any]], on_error: str) -> Tuple[List[Optional[Dict[str, Any]]], Dict[int, str]]:
        """The answers, and with ``on_error="skip"`` why each skipped request was skipped."""
        import trellis

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", trellis.errors.SkippedRequestWarning)
            if self.task == "retrieve":
                answers = self.handle.retrieve_batch(requests, on_error=on_error)
            else:
                answers = self.handle.respond_batch(requests, on_error=on_error)
        reasons = {}
        for w in seen:
            m = re.match(r"request (\d+): (.*) \(skipped\)$", str(w.message), re.S)
            if m:
                reasons[int(m.group(1))] = m.group(2)
        return answers, reasons

    @staticmethod
    def _where(row: Dict[str, Any]) -> str:
        """How a request is named in a message: its input line, else its id."""
        if row.get("line") is not None:
            return f"{row.get('file', 'input')}:{row['line']}"
        return f"request {json.dumps(row.get('id'))}"

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, List[Any]]:
        import trellis

        columns = {k: list(v) for k, v in batch.items()}
        n = len(next(iter(columns.values()), []))
        rows: List[Dict[str, Any]] = []
        for i in range(n):
            rows.append({k: _plain(v[i]) for k, v in columns.items() if v[i] is not None})
        # Rows read as raw lines (`python -m trellis.ray` on JSON lines): parsed here, so a
        # bad line is one bad request, not a failed read of the whole input.
        requests: List[Optional[Dict[str, Any]]] = []
        problems: Dict[int, str] = {}
        for i, row in enumerate(rows):
            if "text" in row or "problem" in row:
                # An empty problem is none (Ray turns a missing value into NaN: no None here).
                if isinstance(row.get("problem"), str) and row["problem"]:
                    problems[i] = row["problem"]
                    requests.append(None)
                    continue
                try:
                    parsed = json.loads(row["text"])
                except ValueError as e:
                    problems[i] = f"invalid JSON: {e}"
                    requests.append(None)
                    continue
                if not isinstance(parsed, dict):
                    problems[i] = 'expected a JSON object with a "history" list'
                    requests.append(None)
                    continue
                row.update({k: v for k, v in parsed.items() if k in ("id", "history", "entities", "knowledge", "seed")})
            requests.append({k: row[k] for k in ("id", "history", "entities", "knowledge", "seed") if k in row})
        if problems and self.on_error == "stop":
            i = min(problems)
            raise trellis.BadInputError(f"{self._where(rows[i])}: {problems[i]}", path=rows[i].get("file"), line=rows[i].get("line"))
        good = [i for i, r in enumerate(requests) if r is not None]
        try:
            answered, reasons = self._answer([requests[i] for i in good], self.on_error)
        except trellis.BadInputError as e:
            # "request K: ..." counts inside this batch: name the row instead.
            m = re.match(r"request (\d+): (.*)$", str(e), re.S)
            if not m:
                raise
            row = rows[good[int(m.group(1))]]
            raise trellis.BadInputError(f"{self._where(row)}: {m.group(2)}", path=row.get("file"), line=row.get("line")) from e
        answers: List[Optional[Dict[str, Any]]] = [None] * n
        for k, i in enumerate(good):
            answers[i] = answered[k]
            if answered[k] is None:
                problems[i] = reasons.get(k, "no answer")
        out: Dict[str, List[Any]] = {"id": [], "answer": [], "error": [], "line": []}
        for i, row in enumerate(rows):
            answer = answers[i]
            if answer is not None and row.get("line") is not None:
                # As `trellis retrieve` writes its answer lines: the input line first.
                answer = {"line": row["line"], **answer}
            out["id"].append(json.dumps(row.get("id")))
            out["answer"].append(None if answer is None else json.dumps(answer, ensure_ascii=False))
            out["error"].append(problems.get(i))
            out["line"].append(row.get("line"))
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
    """Parquet as it is; JSON lines as numbered raw lines (read here, parsed by the actors,
    so that a bad line is reported with its number and the others still answered)."""
    import ray.data

    if path.endswith(".parquet") or os.path.isdir(path):
        return ray.data.read_parquet(path)
    rows = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if raw.startswith(b"\xef\xbb\xbf") and number == 1:
                raw = raw[3:]
            if not raw.strip():
                continue
            try:
                rows.append({"file": path, "line": number, "text": raw.decode("utf-8"), "problem": ""})
            except UnicodeDecodeError as e:
                rows.append({"file": path, "line": number, "text": "", "problem": f"invalid UTF-8 at byte {e.start} of the line"})
    return ray.data.from_items(rows)


def _check_settings(args: Any, common: Dict[str, Any]) -> None:
    """The settings checked here, before Ray starts, by the library alone (no store or model
    is opened: on a cluster they may live only on the nodes): bad settings fail at once,
    as the command line fails."""
    import trellis

    options = {k: v for k, v in common.items() if k not in ("actors", "threads", "on_error", "batch_size", "top")}
    if args.task == "retrieve":
        trellis.check_settings("retriever", args.retriever or "pcst", **options)
    else:
        trellis.check_settings("pipeline", args.retriever or "gsr", **options)


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
    import trellis

    common = dict(model=args.model, actors=args.actors, threads=args.threads, on_error=args.on_error, **dict(args.option))
    if args.top is not None:
        common["top"] = args.top
    if args.batch_size is not None:
        common["batch_size"] = args.batch_size
    try:
        _check_settings(args, common)
        return _run(args, common)
    except trellis.SettingError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except trellis.BadInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 65
    except trellis.TrellisError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # a failure inside an actor reaches the driver wrapped by Ray
        cause = _cause(e)
        if isinstance(cause, trellis.BadInputError):
            print(f"error: {cause}", file=sys.stderr)
            return 65
        if isinstance(cause, trellis.TrellisError):
            print(f"error: {cause}", file=sys.stderr)
            return 1
        raise


def _cause(e: BaseException) -> BaseException:
    """The exception an actor raised, from Ray's wrappers of it (its `cause`, the Python
    chain, or, where Ray kept only the text, the `trellis.errors.X: message` line of it)."""
    import trellis

    todo, seen = [e], set()
    while todo:
        x = todo.pop(0)
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, trellis.TrellisError):
            return x
        todo.extend([getattr(x, "cause", None), x.__cause__, x.__context__])
    m = re.search(r"trellis\.errors\.(\w+): (.*)", str(e))
    if m and hasattr(trellis.errors, m.group(1)):
        return getattr(trellis.errors, m.group(1))(m.group(2))
    return e


def _run(args: Any, common: Dict[str, Any]) -> int:
    import ray

    if not os.path.exists(args.input):
        print(f"error: {args.input}: no such file", file=sys.stderr)
        return 1
    ray.init(address=args.address, ignore_reinit_error=True, log_to_driver=False)
    ds = _read(args.input)
    if args.actors * (args.threads or 1) >= ray.cluster_resources().get("CPU", 0):
        # The actors would hold every CPU and leave none to the read tasks feeding them:
        # read the input first.
        ds = ds.materialize()
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
                    where = f"{args.input}:{row['line']}" if row.get("line") is not None else f"request {row['id']}"
                    print(f"{where}: {row['error']} (skipped)", file=sys.stderr)
                    skipped += 1
                    continue
                f.write(row["answer"] + "\n")
                answered += 1
        os.replace(tmp, args.output)
    print(f"answered {answered} requests" + (f", skipped {skipped}" if skipped else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
