"""The exceptions of trellis, all rooted at :class:`TrellisError`.

- :class:`BadInputError` (also a ``ValueError``): bad input data, such as a malformed
  line of a triples file (``.path`` and ``.line`` say where) or a bad request.
- :class:`SettingError` (also a ``ValueError``): an option outside its range, an unknown
  name.
- :class:`StoreError` (also an ``OSError``): the store or a file cannot be opened, read
  or written (``.path`` when known).
- :class:`ModelError`: a model directory, ONNX Runtime or a tokenizer failed.
- :class:`CancelledError`: work cancelled (a Ctrl-C during a long call is re-raised as
  ``KeyboardInterrupt`` itself).

:class:`SkippedRequestWarning` (a ``UserWarning``) says which request of a batch run with
``on_error="skip"`` was skipped and why. An exception's causes (the library's error chain)
are its ``__cause__`` chain, each a :class:`TrellisError` with its own message.
"""

from typing import Optional

__all__ = ["TrellisError", "BadInputError", "SettingError", "StoreError", "ModelError", "CancelledError", "SkippedRequestWarning"]


class TrellisError(Exception):
    """Any error of trellis."""


class BadInputError(TrellisError, ValueError):
    """Bad input data: ``path`` and ``line`` (1-based) where the error has them."""

    def __init__(self, message: str, path: Optional[str] = None, line: Optional[int] = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line


class SettingError(TrellisError, ValueError):
    """An option outside its range, or a name trellis does not know."""


class StoreError(TrellisError, OSError):
    """The store or a file failed: ``path`` (also ``filename``) when known."""

    def __init__(self, message: str, path: Optional[str] = None) -> None:
        super().__init__(message)
        self.path = path
        self.filename = path

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ModelError(TrellisError):
    """A model directory, ONNX Runtime or a tokenizer failed."""


class CancelledError(TrellisError):
    """Work that was cancelled before it finished."""


class SkippedRequestWarning(UserWarning):
    """A request of a batch skipped with ``on_error="skip"``: which one (its index) and why."""
