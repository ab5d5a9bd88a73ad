"""The GIL released during long calls, Ctrl-C during a load, handles in other processes."""

import _thread
import multiprocessing
import pickle
import threading
import time

import pytest

import trellis
from conftest import GSR, SAMPLE


def test_other_threads_run_during_a_long_batch(store, dev_requests):
    retriever = trellis.Retriever(store, "gsr", model=GSR)
    histories = [r["history"] for r in dev_requests] * 3
    ticks = []
    stop = threading.Event()

    def counter():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.002)

    t = threading.Thread(target=counter)
    t.start()
    try:
        start = time.monotonic()
        answers = retriever.retrieve_batch(histories)
        end = time.monotonic()
    finally:
        stop.set()
        t.join()
    assert len(answers) == len(histories)
    # Held for the whole call, the GIL would let the counter run only at the call's edges
    # (argument conversion); released, it runs throughout.
    assert end - start > 0.5, "the batch is too short to tell"
    inside = [x for x in ticks if start + 0.2 < x < end - 0.2]
    assert len(inside) >= 20


def big_tsv(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        for i in range(lines):
            f.write(f"entity {i}\trelation {i % 50}\tentity {(i * 7919) % lines}\n")


def test_keyboard_interrupt_cancels_a_load_and_leaves_the_store(tmp_path):
    kg = tmp_path / "kg"
    trellis.ingest(kg, [SAMPLE])
    before = trellis.Store(kg).stats()
    big = tmp_path / "big.tsv"
    big_tsv(big, 400_000)
    calls = []

    def progress(p):
        calls.append(p)
        if len(calls) == 1:
            # As Ctrl-C does: the signal handler raises KeyboardInterrupt in the main thread.
            _thread.interrupt_main()

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        trellis.ingest(kg, [big], progress=progress)
    stopped = time.monotonic() - started
    # The store is as it was: the cancelled load committed nothing, and a new load runs.
    after = trellis.Store(kg)
    assert after.stats()["facts"] == before["facts"] and after.stats()["loads"] == before["loads"]
    assert after.validate()["problems"] == []
    full = trellis.ingest(kg, [big])
    assert full["new_facts"] > 0
    assert stopped < full["elapsed"]["secs"] + full["elapsed"]["nanos"] / 1e9 + 5


def test_an_exception_in_progress_cancels_the_load(tmp_path):
    big = tmp_path / "big.tsv"
    big_tsv(big, 400_000)

    def progress(p):
        raise RuntimeError("stop it")

    with pytest.raises(RuntimeError, match="stop it"):
        trellis.ingest(tmp_path / "kg", [big], progress=progress)
    # A first load that stops leaves no store behind.
    assert not (tmp_path / "kg").exists()


def retrieve_in_child(retriever, history):
    return retriever.retrieve(history)


def test_handles_pickle_into_a_spawned_process(store):
    pcst = trellis.Retriever(store, "pcst", top=3, bm25_turns=2)
    gsr = trellis.Retriever(store, "gsr", model=GSR, beams=3, top=2)
    history = ["I loved Happy Gilmore.", "Me too, Adam Sandler is so funny. Do you like him?"]
    # A pickle holds what reopens the handle, not the handle.
    assert len(pickle.dumps(gsr)) < 2000
    again = pickle.loads(pickle.dumps(store))
    assert again.path == store.path and again.read_only
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        got = pool.starmap(retrieve_in_child, [(pcst, history), (gsr, history)])
    assert got == [pcst.retrieve(history), gsr.retrieve(history)]


# Handles a forked child inherits (by memory, not by pickling: a forked Process's target
# reads them from here).
_INHERITED = {}


def _use_inherited(conn):
    pcst, gsr, store, history = _INHERITED["handles"]
    try:
        conn.send(("ok", [pcst.retrieve_batch([history] * 4), gsr.retrieve(history), store.stats()["facts"]]))
    except BaseException as e:  # reported to the parent, not lost in the child
        conn.send(("error", repr(e)))
    conn.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_handles_work_in_a_forked_child(store):
    """The reopen-after-fork path: the child uses the very objects the parent made (their
    thread pools and model sessions do not survive fork), which reopen themselves there."""
    history = ["Do you know anything about Jordan Spieth?"]
    pcst = trellis.Retriever(store, "pcst")
    gsr = trellis.Retriever(store, "gsr", model=GSR, top=2)
    # Used in the parent first: its thread pools and model sessions exist when it forks.
    expected = [pcst.retrieve_batch([history] * 4), gsr.retrieve(history), store.stats()["facts"]]
    _INHERITED["handles"] = (pcst, gsr, store, history)
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_use_inherited, args=(child,))
    p.start()
    assert parent.poll(120), "the forked child answered nothing"
    status, got = parent.recv()
    p.join(60)
    assert (status, p.exitcode) == ("ok", 0), got
    assert got == expected
    # The parent's handles are unharmed.
    assert gsr.retrieve(history) == expected[1]


def test_batch_progress_and_ctrl_c(store, dev_requests):
    retriever = trellis.Retriever(store, "gsr", model=GSR, top=2)
    histories = [r["history"] for r in dev_requests[:40]]
    seen = []
    answers = retriever.retrieve_batch(histories, progress=seen.append)
    assert seen[-1] == {"work": "retrieve", "step": 1, "steps": 1, "stage": "turns", "done": 40, "total": 40, "unit": "turns", "facts": None}
    assert [p["done"] for p in seen] == sorted({p["done"] for p in seen})

    def interrupt(p):
        _thread.interrupt_main()

    with pytest.raises(KeyboardInterrupt):
        retriever.retrieve_batch(histories * 5, progress=interrupt)
    # The handle is unharmed: the same answers after the interruption.
    assert retriever.retrieve_batch(histories) == answers


def facts_of(path):
    with trellis.Store.open_read_only(path) as s:
        return s.stats()["facts"]


def test_a_cancel_near_the_commit_is_told_truthfully(tmp_path):
    """A cancel as the load commits either stops it (the store unchanged) or comes too late
    (the load is stored, and the exception says so): never "cancelled" and stored silently.
    (Before the commit point existed, 5 runs in 5 stored the load and said nothing.)"""
    big = tmp_path / "big.tsv"
    big_tsv(big, 60_000)
    for attempt in range(5):
        kg = tmp_path / f"kg{attempt}"
        trellis.ingest(kg, [SAMPLE])
        before = facts_of(kg)

        def progress(p):
            # The commit step's report: the worker goes on while it is delivered.
            if p["stage"] == "commit":
                raise RuntimeError("stop it")

        with pytest.raises(RuntimeError, match="stop it") as e:
            trellis.ingest(kg, [big], progress=progress)
        committed = getattr(e.value, "committed", False)
        after = facts_of(kg)
        if committed:
            assert after > before
            assert any("commit point" in n for n in getattr(e.value, "__notes__", []))
        else:
            assert after == before
        assert trellis.Store(kg).validate()["problems"] == []


def test_a_writer_handle_closes_and_frees_the_store_for_a_load(tmp_path):
    kg = tmp_path / "kg"
    trellis.ingest(kg, [SAMPLE])
    writer = trellis.Store.open(kg)
    # Refused at once (no wait for a lock this process holds), naming what to do.
    started = time.monotonic()
    with pytest.raises(trellis.StoreError, match=r"this process holds the store open for writing .*close that handle first"):
        trellis.ingest(kg, [SAMPLE])
    assert time.monotonic() - started < 2
    writer.close()
    assert writer.closed and "(closed)" in repr(writer)
    with pytest.raises(ValueError, match="is closed"):
        writer.stats()
    writer.close()  # twice is harmless
    trellis.ingest(kg, [SAMPLE])
    with trellis.Store.open(kg) as again:
        assert again.stats()["loads"]
    assert again.closed
    trellis.index_tokens(kg, GSR / "tokenizer.json")


def test_a_failed_open_of_a_missing_path_leaves_nothing_behind(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(trellis.StoreError, match="no such store directory"):
        trellis.Store.open(missing)
    with pytest.raises(trellis.StoreError, match="no such store directory"):
        trellis.index_tokens(missing, GSR / "tokenizer.json")
    assert not missing.exists()
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(trellis.StoreError, match="is a file, not a store directory"):
        trellis.Store.open(a_file)
    with pytest.raises(trellis.StoreError, match="is a file, not a store directory"):
        trellis.ingest(a_file, [SAMPLE])


def test_a_writer_handle_collected_without_close_frees_the_store(tmp_path):
    import gc

    kg = tmp_path / "kg"
    trellis.ingest(kg, [SAMPLE])

    def use_a_writer():
        w = trellis.Store.open(kg)
        assert w.stats()["facts"] > 0

    use_a_writer()
    gc.collect()
    # Its lock and its entry among this process's writers went with it.
    trellis.ingest(kg, [SAMPLE])
    with trellis.Store.open(kg) as again:
        assert not again.closed
