"""How the run loop treats failures of user code: TaskError messages and the
``task.ignored.exceptions`` policy.

Example::

    >>> policy = IgnoredExceptions(["json.decoder.JSONDecodeError", "KeyError"])
    >>> policy.matches(KeyError("k")), policy.matches(ValueError("v"))
    (True, False)
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Mapping

from weir.stores.config import Config, declare

from weir.engine.errors import TaskError
from weir.engine.model import SystemStreamPartition

__all__ = ["TASK_IGNORED_EXCEPTIONS", "IgnoredExceptions", "task_error", "class_name"]

TASK_IGNORED_EXCEPTIONS = declare(
    "task.ignored.exceptions", list, [],
    "Exception classes (dotted names, e.g. `json.JSONDecodeError`, `ValueError`; subclasses "
    "match; `*` = all) that are logged, counted and skipped instead of stopping the task.",
    component="run loop")

_COMMIT_HINT = ("The stores, producers or checkpoint manager failed; fix the cause and restart "
                "(processing resumes after the last checkpoint).")
_USER_HINT = ("Fix the task, or list the exception class in task.ignored.exceptions to log and "
              "skip such failures.")


def task_error(task_name: str, exc: BaseException, *, during: str,
               ssp: SystemStreamPartition | None = None, offset: int | None = None) -> TaskError:
    """A TaskError for ``exc`` raised by user code ``during`` ("process", "window", ...).

    The message names the task, SSP and offset and includes the user traceback; the error
    has ``task_name``, ``ssp``, ``offset``, ``during`` and ``user_traceback`` attributes and
    ``__cause__`` is ``exc``."""
    where = f" of {ssp} offset {offset}" if ssp is not None else ""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    err = TaskError(f"task '{task_name}' failed in {during}{where}: {type(exc).__name__}: "
                    f"{exc}\n--- traceback ---\n{tb.rstrip()}\n--- end of traceback ---\n"
                    + (_COMMIT_HINT if during == "commit" else _USER_HINT))
    err.task_name, err.ssp, err.offset = task_name, ssp, offset
    err.during, err.user_traceback = during, tb
    err.__cause__ = exc
    return err


def class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class IgnoredExceptions:
    """The ``task.ignored.exceptions`` policy. A name matches the exception's class or any
    base class, by dotted name (``json.decoder.JSONDecodeError``); builtins also match by
    bare name (``ValueError``). ``*`` matches every exception raised by user code."""

    __slots__ = ("_all", "_names", "_cache")

    def __init__(self, names: Iterable[str] = ()):
        names = [n.strip() for n in names if n.strip()]
        self._all = "*" in names
        self._names = frozenset(n for n in names if n != "*")
        self._cache: dict[type, bool] = {}

    @classmethod
    def from_config(cls, config: Config | Mapping[str, str]) -> "IgnoredExceptions":
        return cls(TASK_IGNORED_EXCEPTIONS.get(config))

    def __bool__(self) -> bool:
        return self._all or bool(self._names)

    def matches(self, exc: BaseException) -> bool:
        cls = type(exc)
        hit = self._cache.get(cls)
        if hit is None:
            hit = self._all or any(
                class_name(c) in self._names
                or (c.__module__ == "builtins" and c.__qualname__ in self._names)
                for c in cls.__mro__)
            self._cache[cls] = hit
        return hit
