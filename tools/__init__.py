"""Trellis's Python tools (tools/README.md): a package so that the scripts of every purpose
share one T5 builder and one linearization (tools/train/t5.py, tools/train/linearize.py)
without editing `sys.path`.

Scripts that import other tools modules run from the repository root as modules,
`python -m tools.reference.gsr_fixture ...`; the training scripts (tools/train/*.py) run as
files and import their neighbours in tools/train/ directly; the stand-alone scripts run
either way.
"""
import os
import sys


def rerun_with_hash_seed(spec):
    """Re-executes the running module (`python -m spec.name`, same arguments) once with
    PYTHONHASHSEED=0, unless it is set so already: optimum's decoder merge walks Python sets
    of initializer names, and fixed string hashing makes the merged file byte-identical
    across runs. Call it before the heavy imports."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", spec.name] + sys.argv[1:])


def refuse_overwrite(paths, force):
    """Stops the script, before any work, when one of `paths` (committed test fixtures or
    goldens) exists and `force` is false: fixtures are frozen, since tests and other goldens
    were made from them, and a rerun with other library versions writes other bytes."""
    there = [str(p) for p in paths if os.path.lexists(p)]
    if there and not force:
        raise SystemExit(
            f"{os.path.basename(sys.argv[0])}: {', '.join(there)} already exist(s) and are frozen fixtures "
            "(tests and goldens were made from them); rerun with --force to rewrite them on purpose, "
            "then run the tests and commit what changed"
        )
