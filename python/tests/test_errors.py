"""Each exception class, raised from a real bad input."""

import pytest

import trellis
from conftest import GENERATOR, GSR, SAMPLE


def test_the_hierarchy():
    assert issubclass(trellis.BadInputError, trellis.TrellisError) and issubclass(trellis.BadInputError, ValueError)
    assert issubclass(trellis.SettingError, trellis.TrellisError) and issubclass(trellis.SettingError, ValueError)
    assert issubclass(trellis.StoreError, trellis.TrellisError) and issubclass(trellis.StoreError, OSError)
    assert issubclass(trellis.ModelError, trellis.TrellisError) and not issubclass(trellis.ModelError, (ValueError, OSError))


def test_bad_line_is_a_value_error_with_its_file_and_line(tmp_path):
    bad = tmp_path / "facts.tsv"
    bad.write_text("a\tr\tb\nc\tr\td\nonly\ttwo\ne\tr\tf\n", encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        trellis.ingest(tmp_path / "kg", [bad])
    e = caught.value
    assert isinstance(e, trellis.BadInputError)
    assert e.path == str(bad) and e.line == 3
    assert str(e).startswith(f"{bad}:3: wrong column count")
    # Nothing was stored: a first load that fails leaves no store.
    assert not (tmp_path / "kg").exists()


def test_bad_ntriples_line(tmp_path):
    bad = tmp_path / "facts.nt"
    bad.write_text("<http://x/a> <http://x/b> <http://x/c> .\n<http://x/a> <http://x/b> .\n", encoding="utf-8")
    with pytest.raises(trellis.BadInputError) as caught:
        trellis.ingest(tmp_path / "kg", [bad])
    assert (caught.value.path, caught.value.line) == (str(bad), 2)


def test_unknown_format_names_the_file(tmp_path):
    odd = tmp_path / "facts.dat"
    odd.write_text("a\tr\tb\n", encoding="utf-8")
    with pytest.raises(trellis.BadInputError) as caught:
        trellis.ingest(tmp_path / "kg", [odd])
    assert caught.value.path == str(odd) and caught.value.line is None


def test_missing_store_and_missing_input_are_os_errors(tmp_path):
    with pytest.raises(OSError) as caught:
        trellis.Store.open_read_only(tmp_path / "nowhere")
    assert isinstance(caught.value, trellis.StoreError)
    assert caught.value.path == str(tmp_path / "nowhere") and caught.value.filename == caught.value.path
    assert "no such store directory" in str(caught.value)
    with pytest.raises(trellis.StoreError) as caught:
        trellis.ingest(tmp_path / "kg", [tmp_path / "missing.tsv"])
    assert caught.value.path == str(tmp_path / "missing.tsv")


def test_store_without_the_models_token_index(tmp_path):
    trellis.ingest(tmp_path / "kg", [SAMPLE])
    with pytest.raises(trellis.StoreError, match="no token index"):
        trellis.Retriever(tmp_path / "kg", "gsr", model=GSR)


def test_bad_model_directories_are_model_errors(tmp_path, store):
    empty = tmp_path / "model"
    empty.mkdir()
    with pytest.raises(trellis.ModelError):
        trellis.Generator(empty)
    with pytest.raises(trellis.ModelError):
        trellis.Retriever(store, "gsr", model=empty)
    # A retriever is not a generator, and the other way round.
    with pytest.raises(trellis.ModelError, match="not a generator"):
        trellis.Generator(GSR)
    with pytest.raises(trellis.ModelError, match="not a retriever"):
        trellis.Retriever(store, "gsr", model=GENERATOR)


def test_settings_out_of_range(store):
    with pytest.raises(trellis.SettingError, match="beams must be within 1..=64, not 0"):
        trellis.Retriever(store, "gsr", model=GSR, beams=0)
    with pytest.raises(trellis.SettingError):
        trellis.Retriever(store, "gsr", model=GSR, alpha=2.0)
    with pytest.raises(trellis.SettingError, match=r"^seed must be within 0\.\.=18446744073709551615, not -1$"):
        trellis.Retriever(store, "random", seed=-1)
    with pytest.raises(trellis.SettingError):
        store.neighbors("Golf", hops=3)


def test_an_exception_keeps_its_cause_chain(tmp_path):
    missing = tmp_path / "missing.tsv"
    with pytest.raises(trellis.StoreError) as e:
        trellis.ingest(tmp_path / "kg", [missing])
    # The message tells the whole story; the chain keeps the operating system's own words.
    assert "missing.tsv" in str(e.value)
    cause = e.value.__cause__
    assert isinstance(cause, trellis.TrellisError), repr(cause)
    assert "No such file or directory" in str(cause) and "missing.tsv" not in str(cause)
