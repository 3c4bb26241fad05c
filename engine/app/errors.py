"""Errors of the high-level API: a graph that cannot run, named by operator and stream."""

from __future__ import annotations

from weir.engine.errors import EngineError

__all__ = ["ApplicationError", "MissingEventTimeError"]


class ApplicationError(EngineError):
    """The application's graph is wrong (a duplicate operator name, a cycle through
    ``partition_by``, a join of streams with different partition counts, ...). The message
    names the operator or stream and the fix."""


class MissingEventTimeError(ApplicationError):
    """A windowed or joined element has no event time (``envelope.timestamp`` is -1 and the
    input has no ``timestamp=`` function)."""
