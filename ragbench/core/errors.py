"""Errors a user can act on. Each names what was wrong and where, before any heavy work starts."""

from __future__ import annotations


class RagbenchError(Exception):
    """Base class: an error whose message is meant for the user, not a traceback."""


class ConfigError(RagbenchError):
    """The sweep config is invalid (names the file and, where known, the line)."""


class DatasetError(RagbenchError):
    """The dataset files are malformed or inconsistent (names the file and line)."""


class ModelError(RagbenchError):
    """An embedding model cannot be resolved or loaded offline."""


class IndexMismatchError(RagbenchError):
    """A collection was queried with vectors of another model, or is incomplete."""


class StoreBusyError(RagbenchError):
    """The results store is held by another process for longer than we are willing to wait; ``holder`` names it
    (``pid N (command)``)."""

    def __init__(self, message: str, holder: str = "pid unknown"):
        super().__init__(message)
        self.holder = holder


class ResultsSpooledError(StoreBusyError):
    """The sweep ended while results.duckdb was still held: its results wait, safe, in the spool."""


class StoreDamagedError(RagbenchError):
    """A results or MLflow store file cannot be read (a broken header, a failed checksum); ``path`` names it. The
    message names the repair: ``ragbench doctor --repair`` sets the file aside and rebuilds it from what survives."""

    def __init__(self, path, cause: str):
        super().__init__(f"{path} is damaged ({cause}); run `ragbench doctor --repair`: it sets the file aside "
                         "(renamed, never deleted), starts a new one and refills it from what survives")
        self.path = path
        self.cause = cause
