"""Brigade's exceptions. Every error the C++ side reports arrives as one of these."""

from __future__ import annotations

from typing import Any, Dict, List, Optional


class BrigadeError(Exception):
    """Base class of Brigade's errors."""


class ConfigError(BrigadeError, ValueError):
    """A bad setting: an unknown key, a bad value, an unreadable data folder or list.

    ``key`` is the setting's TOML key (``"batch_size"``, ``"stages.decode.concurrency"``,
    ``"rank"`` for a bad RANK variable) as the C++ side reports it (launch::ConfigError::key),
    else None: a TOML syntax error, a launch variable that is no key (MASTER_PORT).
    """

    def __init__(self, message: str, key: Optional[str] = None) -> None:
        super().__init__(message)
        self.key = key or None


class CheckpointError(BrigadeError, ValueError):
    """A state dict that cannot be loaded: corrupt, of another job or dataset, or an
    incomplete set of rank states for an elastic resume. ``kind`` is one of io,
    not_found, corrupt, version, mismatched, incomplete, conflict."""

    def __init__(self, message: str, kind: str = "", file: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.file = file


class PipelineError(BrigadeError, RuntimeError):
    """The pipeline failed: the failure budget (``max_failures``) was exceeded.

    ``causes`` lists the most recent failures (at most 16, oldest first), each a dict
    of the engine's record: ``stage``, ``id`` and ``path`` (of the sample, or None),
    ``code`` (the error code's name, e.g. ``"bad_data"``, ``"not_found"``,
    ``"timed_out"``, ``"lost_on_attempts"``, or None), ``cause`` (the sample's error
    without its name), ``message`` (``"sample ID (PATH): cause"``) and ``positions``.
    """

    def __init__(self, message: str, causes: Optional[List[Dict[str, Any]]] = None) -> None:
        super().__init__(message)
        self.causes = list(causes or [])


class DecodeError(PipelineError):
    """A PipelineError whose failures are samples that could not be read or decoded;
    ``id``, ``path``, ``code`` (the error code's name, e.g. ``"bad_data"``), ``stage``
    (``"read"``, ``"decode"``, ``"remote_decode"``) and ``cause`` name the last of
    them."""

    def __init__(self, message: str, causes: Optional[List[Dict[str, Any]]] = None,
                 id: Optional[int] = None, path: Optional[str] = None,
                 cause: Optional[str] = None, code: Optional[str] = None,
                 stage: Optional[str] = None) -> None:
        super().__init__(message, causes)
        self.id = id
        self.path = path
        self.cause = cause
        self.code = code
        self.stage = stage
