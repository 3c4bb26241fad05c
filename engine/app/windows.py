"""Windows of the high-level API: what to group, by which key, on which clock, when to emit.

A window collects the elements of one key that fall in it, folds them into an accumulator, and
emits :class:`WindowPane` s. Two clocks (:class:`TimeDomain`):

* **event time** (``Windows.tumbling``/``Windows.session``, the default): an element belongs to
  the window of its event time, and the window **fires** when the watermark passes its end: the
  pane of ``[start, end)`` is emitted once the watermark reaches ``end - 1`` (Flink's
  convention: a watermark ``W`` means no element with an event time ``<= W`` is expected any
  more). An element behind that is **late**;
* **processing time** (Samza's ``Windows.keyedTumblingWindow`` & co., here
  :meth:`Windows.keyed_tumbling_window`, :meth:`Windows.tumbling_window`,
  :meth:`Windows.keyed_session_window`, :meth:`Windows.session_window`, or ``time=`` on the
  factories above): an element belongs to the window of the wall-clock time it is processed at
  and the window fires when the clock passes its end; nothing is ever late.

Kinds: ``tumbling`` (fixed, non-overlapping windows ``[k*size, (k+1)*size)``) and
``session`` (a window per burst of activity of a key: an element at ``t`` opens
``[t, t + gap)``, and windows of the same key that overlap merge, their accumulators too, so
event-time session windows need an aggregate with ``merge``).

**Triggers** (:mod:`weir.engine.app.triggers`): ``set_early_trigger`` emits speculative
panes before the window fires, ``set_late_trigger`` decides when late elements (within the
allowed lateness) emit refinements (default: each at once). ``set_accumulation_mode``:
``ACCUMULATING`` panes carry everything so far, ``DISCARDING`` panes only what arrived since
the previous pane. Every pane says what it is (:class:`PaneTiming` early/on-time/late, its
index among the window's panes, the mode) so a consumer can tell a refinement from a new
result.

**Allowed lateness** (event time). A late element whose window's end is less than
``allowed_lateness_ms`` behind the watermark updates the window and emits a ``LATE`` pane (by
the late trigger). Past that it is dropped: counted (``late-dropped-<operator>`` in the
task's metrics), logged (a rate-limited warning with counts) and sent to the window's late
side output when the application asked for one (``stream.window(...).late_elements()``).
Window state is kept until the watermark passes ``end - 1 + allowed_lateness_ms``.

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
    >>> samza = Windows.keyed_tumbling_window(lambda v: v["user"], 10_000, lambda: 0,
    ...                                       lambda view, n: n + 1)
    >>> samza.time.value, samza.aggregate.add(5, {"user": "ann"})
    ('processing_time', 6)
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from weir.engine.app.triggers import Trigger, duration_ms

__all__ = [
    "WindowKind",
    "TimeDomain",
    "AccumulationMode",
    "PaneTiming",
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


class TimeDomain(Enum):
    """The clock a window runs on (Samza's ``DurationCharacteristic``)."""

    EVENT_TIME = "event_time"
    PROCESSING_TIME = "processing_time"


class AccumulationMode(Enum):
    """What a pane after the first carries (Samza's and Beam's ``AccumulationMode``):
    everything of the window so far, or only what arrived since the previous pane."""

    ACCUMULATING = "accumulating"
    DISCARDING = "discarding"


class PaneTiming(Enum):
    """Why a pane was emitted (Beam's ``PaneInfo.Timing``; Samza's ``FiringType`` calls
    ``ON_TIME`` ``DEFAULT``): ``EARLY`` before the window closed (an early trigger, or a
    drain: speculative, a later pane of the same window refines it), ``ON_TIME`` when it
    closed (the watermark, or the processing-time clock, passed its end; the end of input),
    ``LATE`` for late elements within the allowed lateness."""

    EARLY = "early"
    ON_TIME = "on_time"
    LATE = "late"


@dataclass(frozen=True)
class Aggregate:
    """How a window folds its elements: ``initial() -> acc``, ``add(acc, element) -> acc``,
    ``merge(acc, acc) -> acc`` (needed by event-time session windows), ``result(acc) ->
    value`` (what the pane carries; the accumulator itself by default)."""

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


def _no_key(_element: Any) -> None:
    """The key of an unkeyed window: one window per task and interval."""
    return None


def _samza_fold(initial_value: Callable[[], Any] | None,
                aggregator: Callable[[Any, Any], Any] | None, what: str) -> Aggregate:
    """Samza's ``(initialValue, FoldLeftFunction(message, oldValue))``; neither: the pane
    carries the list of the window's messages."""
    if (initial_value is None) != (aggregator is None):
        raise ValueError(f"{what}: give both initial_value and aggregator (Samza's "
                         f"SupplierFunction and FoldLeftFunction), or neither (the pane "
                         f"carries the window's messages)")
    if aggregator is None:
        return collecting()
    if not callable(initial_value) or not callable(aggregator):
        raise ValueError(f"{what}: initial_value and aggregator must be callable")
    return Aggregate(initial_value, lambda acc, message: aggregator(message, acc))


@dataclass(eq=False)
class WindowSpec:
    """A window definition (see :class:`Windows`). Like Samza's ``Window``, the setters
    change the definition and return it, so they chain
    (``Windows.tumbling(1000).set_early_trigger(...)``) or stand alone."""

    kind: WindowKind
    size_ms: int
    key: Callable[[Any], Any]
    aggregate: Aggregate
    allowed_lateness_ms: int = 0
    time: TimeDomain = TimeDomain.EVENT_TIME
    early_trigger: Trigger | None = None
    late_trigger: Trigger | None = None
    mode: AccumulationMode = AccumulationMode.ACCUMULATING

    def __post_init__(self) -> None:
        what = "size" if self.kind is WindowKind.TUMBLING else "gap"
        if not isinstance(self.size_ms, int) or isinstance(self.size_ms, bool) \
                or self.size_ms <= 0:
            raise ValueError(f"a {self.kind.value} window needs a positive {what} in "
                             f"milliseconds, got {self.size_ms!r}")
        if not isinstance(self.time, TimeDomain):
            raise ValueError(f"time must be TimeDomain.EVENT_TIME or TimeDomain.PROCESSING_TIME, "
                             f"got {self.time!r}")
        if not isinstance(self.allowed_lateness_ms, int) or self.allowed_lateness_ms < 0:
            raise ValueError(f"allowed_lateness_ms must be an integer >= 0, got "
                             f"{self.allowed_lateness_ms!r}")
        if self.allowed_lateness_ms and self.time is TimeDomain.PROCESSING_TIME:
            raise ValueError("a processing-time window has no late elements (each belongs to "
                             "the window of the time it is processed at): remove "
                             "allowed_lateness_ms, or use an event-time window")
        if (self.kind is WindowKind.SESSION and self.time is TimeDomain.EVENT_TIME
                and self.aggregate.merge is None):
            raise ValueError("event-time session windows merge when they overlap: give the "
                             "aggregate a merge function (Aggregate(initial, add, merge))")

    # -- Samza's Window setters ---------------------------------------------------------------
    def set_early_trigger(self, trigger: Trigger) -> "WindowSpec":
        """Emit ``EARLY`` panes when ``trigger`` fires, before the window closes (Samza's
        ``setEarlyTrigger``)."""
        self.early_trigger = _trigger(trigger, "set_early_trigger")
        return self

    def set_late_trigger(self, trigger: Trigger) -> "WindowSpec":
        """Emit ``LATE`` panes for late elements (within the allowed lateness) when
        ``trigger`` fires; the default emits one per late element. Processing-time windows
        have no late elements, so there it never fires (as in Samza)."""
        self.late_trigger = _trigger(trigger, "set_late_trigger")
        return self

    def set_accumulation_mode(self, mode: AccumulationMode) -> "WindowSpec":
        """``ACCUMULATING`` (the default) or ``DISCARDING`` panes (Samza's
        ``setAccumulationMode``)."""
        if not isinstance(mode, AccumulationMode):
            raise ValueError(f"set_accumulation_mode takes AccumulationMode.ACCUMULATING or "
                             f"AccumulationMode.DISCARDING, got {mode!r}")
        self.mode = mode
        return self

    # -- what the planner and the operator read ----------------------------------------------
    @property
    def processing_time(self) -> bool:
        return self.time is TimeDomain.PROCESSING_TIME

    @property
    def keyed(self) -> bool:
        return self.key is not _no_key

    def timer_durations(self) -> tuple[int, ...]:
        """The processing-time durations the window's timer must honour (empty: it needs
        none)."""
        out = [d for t in (self.early_trigger, self.late_trigger) if t is not None
               for d in t.durations()]
        if self.processing_time:
            out.append(self.size_ms)
        return tuple(out)

    def assign(self, ts: int) -> tuple[int, int]:
        """The window ``(start, end)`` an element at ``ts`` opens."""
        if self.kind is WindowKind.TUMBLING:
            start = ts - ts % self.size_ms
            return start, start + self.size_ms
        return ts, ts + self.size_ms

    def describe(self) -> str:
        what = "size" if self.kind is WindowKind.TUMBLING else "gap"
        parts = [f"{'' if self.keyed else 'unkeyed '}{self.kind.value} {what} {self.size_ms} ms",
                 self.time.value.replace("_", " ")]
        if self.allowed_lateness_ms:
            parts.append(f"lateness {self.allowed_lateness_ms} ms")
        if self.early_trigger is not None:
            parts.append(f"early {self.early_trigger.describe()}")
        if self.late_trigger is not None:
            parts.append(f"late {self.late_trigger.describe()}")
        if self.mode is AccumulationMode.DISCARDING:
            parts.append("discarding")
        return ", ".join(parts)


def _trigger(trigger: Any, what: str) -> Trigger:
    if not isinstance(trigger, Trigger):
        raise ValueError(f"{what} takes a trigger (Triggers.count(...), Triggers.repeat(...), "
                         f"...), got {trigger!r}")
    return trigger


class Windows:
    """Factories of window definitions.

    Weir's (event time by default, ``time=TimeDomain.PROCESSING_TIME`` for processing time):
    ``key`` defaults to the element's ``key`` (the elements after ``partition_by`` are
    ``KV(key, value)``), ``aggregate`` to :func:`count`.

    Samza's (processing time, as Samza's ``Windows``; durations in ms or ``timedelta``):
    ``keyed_tumbling_window(key_fn, interval, initial_value=None, aggregator=None)``,
    ``tumbling_window(interval, ...)``, ``keyed_session_window(key_fn, gap, ...)``,
    ``session_window(gap, ...)``. ``aggregator(message, value) -> value`` is Samza's
    ``FoldLeftFunction`` (message first); without ``initial_value``/``aggregator`` the pane
    carries the list of the window's messages. Unkeyed windows have the key ``None``: one
    window per task.
    """

    @staticmethod
    def tumbling(size_ms: int, *, key: Callable[[Any], Any] | None = None,
                 aggregate: Aggregate | None = None, allowed_lateness_ms: int = 0,
                 time: TimeDomain = TimeDomain.EVENT_TIME) -> WindowSpec:
        return WindowSpec(WindowKind.TUMBLING, _size(size_ms, "tumbling window size"),
                          key or _kv_key, aggregate or count(), allowed_lateness_ms, time)

    @staticmethod
    def session(gap_ms: int, *, key: Callable[[Any], Any] | None = None,
                aggregate: Aggregate | None = None, allowed_lateness_ms: int = 0,
                time: TimeDomain = TimeDomain.EVENT_TIME) -> WindowSpec:
        return WindowSpec(WindowKind.SESSION, _size(gap_ms, "session gap"), key or _kv_key,
                          aggregate or count(), allowed_lateness_ms, time)

    # -- Samza's factories (processing time) --------------------------------------------------
    @staticmethod
    def keyed_tumbling_window(key_fn: Callable[[Any], Any], interval: Any,
                              initial_value: Callable[[], Any] | None = None,
                              aggregator: Callable[[Any, Any], Any] | None = None) -> WindowSpec:
        """Samza's ``Windows.keyedTumblingWindow``: per ``key_fn(message)``, fixed windows of
        ``interval`` in processing time."""
        what = "keyed_tumbling_window"
        return WindowSpec(WindowKind.TUMBLING, duration_ms(interval, f"{what}'s interval"),
                          _callable_key(key_fn, what), _samza_fold(initial_value, aggregator, what),
                          time=TimeDomain.PROCESSING_TIME)

    @staticmethod
    def tumbling_window(interval: Any, initial_value: Callable[[], Any] | None = None,
                        aggregator: Callable[[Any, Any], Any] | None = None) -> WindowSpec:
        """Samza's ``Windows.tumblingWindow``: fixed windows of ``interval`` in processing
        time over all of a task's messages (key ``None``)."""
        what = "tumbling_window"
        return WindowSpec(WindowKind.TUMBLING, duration_ms(interval, f"{what}'s interval"),
                          _no_key, _samza_fold(initial_value, aggregator, what),
                          time=TimeDomain.PROCESSING_TIME)

    @staticmethod
    def keyed_session_window(key_fn: Callable[[Any], Any], session_gap: Any,
                             initial_value: Callable[[], Any] | None = None,
                             aggregator: Callable[[Any, Any], Any] | None = None) -> WindowSpec:
        """Samza's ``Windows.keyedSessionWindow``: per key, a session closes when no message
        arrived for ``session_gap`` (processing time)."""
        what = "keyed_session_window"
        return WindowSpec(WindowKind.SESSION, duration_ms(session_gap, f"{what}'s gap"),
                          _callable_key(key_fn, what), _samza_fold(initial_value, aggregator, what),
                          time=TimeDomain.PROCESSING_TIME)

    @staticmethod
    def session_window(session_gap: Any, initial_value: Callable[[], Any] | None = None,
                       aggregator: Callable[[Any, Any], Any] | None = None) -> WindowSpec:
        """A session window over all of a task's messages (key ``None``; Samza has only the
        keyed one)."""
        what = "session_window"
        return WindowSpec(WindowKind.SESSION, duration_ms(session_gap, f"{what}'s gap"),
                          _no_key, _samza_fold(initial_value, aggregator, what),
                          time=TimeDomain.PROCESSING_TIME)


def _size(value: Any, what: str) -> Any:
    """An ``int`` stays as is (``WindowSpec`` checks it); a ``timedelta`` becomes ms."""
    return duration_ms(value, what) if not isinstance(value, int) else value


def _callable_key(key_fn: Any, what: str) -> Callable[[Any], Any]:
    if not callable(key_fn):
        raise ValueError(f"{what}: key_fn must be callable, got {key_fn!r}")
    return key_fn


@dataclass(frozen=True, slots=True)
class WindowPane:
    """What a window emits: the key, the window ``[start, end)``, the aggregated value and
    the pane's place among the window's panes: ``timing`` (early, on time, late), ``index``
    (0 for the first pane of the window, then 1, 2, ...; the pane with the highest index is
    the latest word on the window) and the accumulation ``mode`` (an accumulating pane
    replaces the earlier ones, a discarding pane adds to them). Its event time is
    ``end - 1``."""

    key: Any
    start: int
    end: int
    value: Any
    timing: PaneTiming = PaneTiming.ON_TIME
    index: int = 0
    mode: AccumulationMode = AccumulationMode.ACCUMULATING

    @property
    def late(self) -> bool:
        """A refinement for late elements (``timing`` is ``LATE``)."""
        return self.timing is PaneTiming.LATE

    @property
    def is_first(self) -> bool:
        return self.index == 0

    def to_dict(self) -> dict[str, Any]:
        """The message :meth:`MessageStream.send_to` writes for a pane."""
        return {"key": self.key, "start": self.start, "end": self.end, "value": self.value,
                "late": self.late, "timing": self.timing.value, "index": self.index,
                "mode": self.mode.value}
