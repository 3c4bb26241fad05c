"""How the run loop treats failures of user code: TaskError messages and the
``task.ignored.exceptions`` policy.

Example::

    >>> policy = IgnoredExceptions(["json.decoder.JSONDecodeError", "KeyError"])
    >>> policy.matches(KeyError("k")), policy.matches(ValueError("v"))
    (True, False)

Errors of the machine (a full disk...) and a store that cannot read its own data
(``StoredDataError``) are never skipped: they are not properties of the message.
"""

from __future__ import annotations

import errno
import os
import re
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from weir.stores.config import Config, declare
from weir.stores.errors import StoredDataError

from weir.engine.errors import TaskError
from weir.engine.model import SystemStreamPartition

__all__ = ["TASK_IGNORED_EXCEPTIONS", "IgnoredExceptions", "MachineFault", "machine_fault",
           "stored_data_error", "task_error", "class_name"]

TASK_IGNORED_EXCEPTIONS = declare(
    "task.ignored.exceptions", list, [],
    "Exception classes (dotted names, e.g. `json.JSONDecodeError`, `ValueError`; subclasses "
    "match; `*` = all) that are logged, counted and skipped instead of stopping the task.",
    component="run loop")

_COMMIT_HINT = ("The stores, producers or checkpoint manager failed; fix the cause and restart "
                "(processing resumes after the last checkpoint).")
_USER_HINT = ("Fix the task, or list the exception class in task.ignored.exceptions to log and "
              "skip such failures.")


# -- errors of the machine ------------------------------------------------------------------

_MACHINE_ERRNOS: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("ENOSPC", "no space left on the device"),
    errno.EDQUOT: ("EDQUOT", "the disk quota is exceeded"),
    errno.EROFS: ("EROFS", "the filesystem is read-only"),
    errno.EIO: ("EIO", "an input/output error of the device"),
}
_PATH = re.compile(r"(/[^\s:'\"]+)")


@dataclass(frozen=True)
class MachineFault:
    """An error of the machine (disk full, quota, read-only filesystem, device I/O error)
    found in an exception: not a property of the message being processed, so skipping the
    message would only lose it. ``path`` is the file or directory when known."""

    code: str
    what: str
    path: str | None = None

    def describe(self) -> str:
        return f"{self.what} ({self.code})" + (f" at {self.path}" if self.path else "")

    def advice(self) -> str:
        where = f"the filesystem of {self.path}" if self.path else "the job's filesystems"
        if self.code == "ENOSPC":
            return f"free space on {where} (or move the job's data to a larger one)"
        if self.code == "EDQUOT":
            return f"raise the disk quota of this user on {where}, or free space under it"
        if self.code == "EROFS":
            return (f"make {where} writable again (a filesystem remounted read-only after a "
                    f"device error needs the system log checked first)")
        device = f"the device holding {self.path}" if self.path else "the job's disks"
        return f"check {device} (system log, SMART): it may be failing"


def machine_fault(exc: BaseException) -> MachineFault | None:
    """The error of the machine behind ``exc`` (itself, its cause or its context), or None.

    An ``OSError`` with errno ENOSPC, EDQUOT, EROFS or EIO counts, and so does an error whose
    text carries the system's message for one of them (RocksDB and LMDB report disk errors as
    text: ``IO error: No space left on device: While appending to file: /x/000012.log``)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _MACHINE_ERRNOS:
            code, what = _MACHINE_ERRNOS[current.errno]
            path = current.filename if current.filename is not None else None
            return MachineFault(code, what, os.fsdecode(path) if path is not None else None)
        text = str(current)
        for number, (code, what) in _MACHINE_ERRNOS.items():
            if os.strerror(number) in text:
                found = _PATH.search(text)
                return MachineFault(code, what, found.group(1) if found else None)
        current = current.__cause__ or current.__context__
    return None


def stored_data_error(exc: BaseException) -> StoredDataError | None:
    """The :class:`~weir.stores.errors.StoredDataError` behind ``exc`` (itself, its cause or
    its context), or None: a store that cannot read its own data (its serdes disagree with
    its bytes). Like an error of the machine it is not a property of the message, so it is
    never skipped."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, StoredDataError):
            return current
        current = current.__cause__ or current.__context__
    return None


def task_error(task_name: str, exc: BaseException, *, during: str,
               ssp: SystemStreamPartition | None = None, offset: int | None = None) -> TaskError:
    """A TaskError for ``exc`` raised by user code ``during`` ("process", "window", ...).

    The message names the task, SSP and offset and includes the user traceback; the error
    has ``task_name``, ``ssp``, ``offset``, ``during``, ``user_traceback`` and
    ``machine_fault`` attributes and ``__cause__`` is ``exc``. An error of the machine (disk
    full, read-only filesystem...) says so, with the path when known, and what to fix; it is
    never offered for ``task.ignored.exceptions``."""
    where = f" of {ssp} offset {offset}" if ssp is not None else ""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    fault = machine_fault(exc)
    if fault is not None:
        headline = f"the machine failed: {fault.describe()}: {type(exc).__name__}: {exc}"
        hint = (f"This is an error of the machine, not of the message: {fault.advice()}, then "
                f"restart the job; it resumes after the last checkpoint and nothing is lost. "
                f"Errors of the machine are never skipped, whatever task.ignored.exceptions "
                f"lists.")
    elif stored_data_error(exc) is not None:
        headline = f"{type(exc).__name__}: {exc}"
        hint = ("A store cannot read its own data with its serdes: the store's bytes and its "
                "stores.<store>.key.serde/msg.serde settings disagree, whatever the message. "
                "Put the serde settings back to the ones the state was written with and "
                "restart (the job resumes after the last checkpoint; nothing is lost), or, to "
                "change them, start the job's state over with `weir checkpoint reset <job "
                "config> --yes`. Such errors are never skipped, whatever "
                "task.ignored.exceptions lists: skipping would drop every message that reads "
                "such a key.")
    else:
        headline = f"{type(exc).__name__}: {exc}"
        hint = _COMMIT_HINT if during == "commit" else _USER_HINT
    err = TaskError(f"task '{task_name}' failed in {during}{where}: {headline}\n"
                    f"--- traceback ---\n{tb.rstrip()}\n--- end of traceback ---\n{hint}")
    err.task_name, err.ssp, err.offset = task_name, ssp, offset
    err.during, err.user_traceback, err.machine_fault = during, tb, fault
    err.__cause__ = exc
    return err


def class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class IgnoredExceptions:
    """The ``task.ignored.exceptions`` policy. A name matches the exception's class or any
    base class, by dotted name (``json.decoder.JSONDecodeError``); builtins also match by
    bare name (``ValueError``). ``*`` matches every exception raised by user code, except an
    error of the machine (:func:`machine_fault`: disk full, read-only filesystem...), which
    nothing matches: skipping the message would lose it and fix nothing."""

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
        if machine_fault(exc) is not None or stored_data_error(exc) is not None:
            return False
        cls = type(exc)
        hit = self._cache.get(cls)
        if hit is None:
            hit = self._all or any(
                class_name(c) in self._names
                or (c.__module__ == "builtins" and c.__qualname__ in self._names)
                for c in cls.__mro__)
            self._cache[cls] = hit
        return hit
