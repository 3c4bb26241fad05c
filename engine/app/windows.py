"""Windows of the high-level API: what to group, by which key, and how to aggregate.

Windows are on **event time** and keyed. A window collects the elements of one key whose
event times fall in it, folds them into an accumulator, and **fires** (emits a
:class:`WindowPane`) when the watermark passes its end: the pane of window ``[start, end)``
is emitted once the watermark reaches ``end - 1`` (Flink's convention: a watermark ``W`` means
no element with an event time ``<= W`` is expected any more).

* ``Windows.tumbling(size_ms)``: fixed, non-overlapping windows ``[k*size, (k+1)*size)``;
* ``Windows.session(gap_ms)``: a window per burst of activity of a key; an element at ``t``
  opens ``[t, t + gap)``, and windows of the same key that overlap merge (their accumulators
  too, so session windows need an aggregate with ``merge``).

**Allowed lateness.** An element whose window has already fired but whose end is less than
``allowed_lateness_ms`` behind the watermark updates the window, which fires again at once with
``late=True`` (a refinement of the earlier pane). Past that it is dropped and counted
(``late-dropped-<operator>`` in the task's metrics). Window state is kept until the watermark
passes ``end - 1 + allowed_lateness_ms``.

Aggregates: :func:`count`, :func:`summing`, :func:`collecting`, or any
``Aggregate(initial, add, merge=None)`` with ``initial() -> acc``, ``add(acc, element) -> acc``
and ``merge(acc1, acc2) -> acc``. Accumulators are stored in the operator's store with
MessagePack: keep them to numbers, strings, lists and dicts.

Example::

    >>> w = Windows.tumbling(60_000, key=lambda view: view["user"], aggregate=count())
    >>> w.assign(125_000)
    (120000, 180000)
    >>> w.aggregate.add(w.aggregate.initial(), {"user": "ann"})
    1
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = [
    "WindowKind",
    "Aggregate",
    "count",
    "summing",
    "collecting",
    "Windows",
    "WindowSpec",
    "WindowPane",
]


class WindowKind(Enum):
    TUMBLING = "tumbling"
    SESSION = "session"


@dataclass(frozen=True)
class Aggregate:
    """How a window folds its elements: ``initial() -> acc``, ``add(acc, element) -> acc``,
    ``merge(acc, acc) -> acc`` (needed by session windows), ``result(acc) -> value`` (what
    the pane carries; the accumulator itself by default)."""

    initial: Callable[[], Any]
    add: Callable[[Any, Any], Any]
    merge: Callable[[Any, Any], Any] | None = None
    result: Callable[[Any], Any] | None = None


def count() -> Aggregate:
    """The number of elements."""
    return Aggregate(lambda: 0, lambda acc, _element: acc + 1, operator.add)


def summing(value: Callable[[Any], Any]) -> Aggregate:
    """The sum of ``value(element)``."""
    return Aggregate(lambda: 0, lambda acc, element: acc + value(element), operator.add)


def collecting(value: Callable[[Any], Any] = lambda element: element) -> Aggregate:
    """The list of ``value(element)``, in arrival order."""
    return Aggregate(list, lambda acc, element: [*acc, value(element)], lambda a, b: [*a, *b])


def _kv_key(element: Any) -> Any:
    try:
        return element.key
    except AttributeError:
        raise TypeError(f"a keyed window needs key=...: the element {element!r} is not a KV "
                        f"(partition_by gives KV(key, value) elements downstream)") from None


@dataclass(frozen=True)
class WindowSpec:
    """A window definition (see :class:`Windows`)."""

    kind: WindowKind
    size_ms: int
    key: Callable[[Any], Any]
    aggregate: Aggregate
    allowed_lateness_ms: int = 0

    def __post_init__(self) -> None:
        what = "size" if self.kind is WindowKind.TUMBLING else "gap"
        if not isinstance(self.size_ms, int) or self.size_ms <= 0:
            raise ValueError(f"a {self.kind.value} window needs a positive {what} in "
                             f"milliseconds, got {self.size_ms!r}")
        if self.allowed_lateness_ms < 0:
            raise ValueError(f"allowed_lateness_ms must be >= 0, got {self.allowed_lateness_ms}")
        if self.kind is WindowKind.SESSION and self.aggregate.merge is None:
            raise ValueError("session windows merge when they overlap: give the aggregate a "
                             "merge function (Aggregate(initial, add, merge))")

    def assign(self, ts: int) -> tuple[int, int]:
        """The window ``(start, end)`` an element at ``ts`` opens."""
        if self.kind is WindowKind.TUMBLING:
            start = ts - ts % self.size_ms
            return start, start + self.size_ms
        return ts, ts + self.size_ms

    def describe(self) -> str:
        lateness = f", lateness {self.allowed_lateness_ms} ms" if self.allowed_lateness_ms else ""
        what = "size" if self.kind is WindowKind.TUMBLING else "gap"
        return f"{self.kind.value} {what} {self.size_ms} ms{lateness}"


class Windows:
    """Factories of window definitions. ``key`` defaults to the element's ``key`` (the
    elements after ``partition_by`` are ``KV(key, value)``); ``aggregate`` to :func:`count`."""

    @staticmethod
    def tumbling(size_ms: int, *, key: Callable[[Any], Any] | None = None,
                 aggregate: Aggregate | None = None, allowed_lateness_ms: int = 0) -> WindowSpec:
        return WindowSpec(WindowKind.TUMBLING, size_ms, key or _kv_key, aggregate or count(),
                          allowed_lateness_ms)

    @staticmethod
    def session(gap_ms: int, *, key: Callable[[Any], Any] | None = None,
                aggregate: Aggregate | None = None, allowed_lateness_ms: int = 0) -> WindowSpec:
        return WindowSpec(WindowKind.SESSION, gap_ms, key or _kv_key, aggregate or count(),
                          allowed_lateness_ms)


@dataclass(frozen=True, slots=True)
class WindowPane:
    """What a window emits: the key, the window ``[start, end)``, the aggregated value, and
    whether this is a late refinement of an earlier pane of the same window. Its event time is
    ``end - 1``."""

    key: Any
    start: int
    end: int
    value: Any
    late: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The message :meth:`MessageStream.send_to` writes for a pane."""
        return {"key": self.key, "start": self.start, "end": self.end, "value": self.value,
                "late": self.late}
