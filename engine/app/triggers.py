"""Triggers: when a window emits a pane before (early) or after (late) the time that closes it.

The counterpart of Samza's ``org.apache.samza.operators.triggers``: build triggers with
:class:`Triggers` and give them to a window with ``set_early_trigger`` / ``set_late_trigger``
(docs/APPLICATIONS.md, "Triggers")::

    Windows.tumbling(60_000).set_early_trigger(
        Triggers.repeat(Triggers.any(Triggers.count(50),
                                     Triggers.time_since_first_message(4_000))))

* :meth:`Triggers.count` fires when ``n`` elements arrived since the trigger started;
* :meth:`Triggers.time_since_first_message` fires ``d`` ms (processing time) after the first
  element since the trigger started;
* :meth:`Triggers.time_since_last_message` fires once no element arrived for ``d`` ms
  (processing time);
* :meth:`Triggers.any` fires when any of its triggers fires;
* :meth:`Triggers.repeat` starts its trigger again after every firing (a trigger that is not
  repeated fires once per window and phase).

Durations are milliseconds (an ``int``) or a :class:`datetime.timedelta` (Samza's
``Duration``); they run on processing time, as in Samza. A trigger is a description; its
**state** for one window is a small value (numbers and lists) that the window operator keeps
in the window's store entry, so a trigger survives a restart with its window (Samza keeps
trigger state in memory only). The protocol, for one window:

* ``state = trigger.start()`` when the window opens (or the late phase begins);
* ``state = trigger.on_element(state, now_ms)`` per element;
* ``trigger.should_fire(state, now_ms)`` after each element and when a timer is due;
* ``trigger.deadline(state)``: the processing time at which ``should_fire`` may turn true
  without another element (None: only elements can fire it);
* ``state = trigger.after_fire()`` once it fired: :data:`FINISHED` (it never fires again for
  this window and phase) unless it repeats.

Example::

    >>> t = Triggers.repeat(Triggers.count(2))
    >>> s = t.on_element(t.start(), now_ms=0)
    >>> t.should_fire(s, 0), t.should_fire(t.on_element(s, 1), 1)
    (False, True)
    >>> t.after_fire() == t.start()
    True
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

__all__ = ["FINISHED", "Trigger", "CountTrigger", "DeadlineTrigger",
           "TimeSinceFirstMessageTrigger", "TimeSinceLastMessageTrigger", "AnyTrigger", "RepeatingTrigger", "Triggers",
           "duration_ms"]

FINISHED = None
"""The state of a trigger that fired and does not repeat: it never fires again."""

_NO_DEADLINE = -1


def duration_ms(value: Any, what: str) -> int:
    """``value`` as a positive number of milliseconds (an ``int`` or a ``timedelta``)."""
    if isinstance(value, timedelta):
        ms = value // timedelta(milliseconds=1)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        raise ValueError(f"{what} must be milliseconds (an int) or a datetime.timedelta, got "
                         f"{value!r}")
    if ms <= 0:
        raise ValueError(f"{what} must be positive, got {ms} ms")
    return ms


class Trigger:
    """Base of triggers (see the module docstring for the protocol). Subclasses are immutable
    descriptions; all state lives in the value :meth:`start` returns."""

    __slots__ = ()

    def start(self) -> Any:
        raise NotImplementedError

    def on_element(self, state: Any, now_ms: int) -> Any:
        raise NotImplementedError

    def should_fire(self, state: Any, now_ms: int) -> bool:
        raise NotImplementedError

    def deadline(self, state: Any) -> int | None:
        """When ``should_fire`` may turn true by the clock alone (None: never)."""
        return None

    def after_fire(self) -> Any:
        """The state after the trigger fired: :data:`FINISHED` unless it repeats."""
        return FINISHED

    def durations(self) -> tuple[int, ...]:
        """The processing-time durations in this trigger (the planner sizes the timer)."""
        return ()

    @property
    def timed(self) -> bool:
        """Whether the trigger needs a processing-time timer."""
        return bool(self.durations())

    def describe(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"Trigger({self.describe()})"


class CountTrigger(Trigger):
    """Fires when ``count`` elements arrived since the trigger started (Samza's
    ``Triggers.count``)."""

    __slots__ = ("count",)

    def __init__(self, count: int):
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"Triggers.count needs a positive integer, got {count!r}")
        self.count = count

    def start(self) -> int:
        return 0

    def on_element(self, state: int, now_ms: int) -> int:
        return state + 1

    def should_fire(self, state: int, now_ms: int) -> bool:
        return state >= self.count

    def describe(self) -> str:
        return f"count({self.count})"


class DeadlineTrigger(Trigger):
    """Base of the processing-time triggers: the state is a deadline (-1 before the first
    element), the trigger fires once the clock reaches it. Subclasses say how an element
    moves the deadline (:meth:`on_element`) and name themselves (:meth:`describe`)."""

    __slots__ = ("duration_ms",)
    _what = "the trigger's duration"

    def __init__(self, duration: Any):
        self.duration_ms = duration_ms(duration, self._what)

    def start(self) -> int:
        return _NO_DEADLINE

    def should_fire(self, state: int, now_ms: int) -> bool:
        return state != _NO_DEADLINE and now_ms >= state

    def deadline(self, state: int) -> int | None:
        return None if state == _NO_DEADLINE else state

    def durations(self) -> tuple[int, ...]:
        return (self.duration_ms,)


class TimeSinceFirstMessageTrigger(DeadlineTrigger):
    """Fires ``duration_ms`` (processing time) after the first element since the trigger
    started. State: the deadline, or -1 before the first element."""

    __slots__ = ()
    _what = "Triggers.time_since_first_message's duration"

    def on_element(self, state: int, now_ms: int) -> int:
        return now_ms + self.duration_ms if state == _NO_DEADLINE else state

    def describe(self) -> str:
        return f"time_since_first_message({self.duration_ms} ms)"


class TimeSinceLastMessageTrigger(DeadlineTrigger):
    """Fires once no element arrived for ``duration_ms`` (processing time). State: the
    deadline (the last element's arrival plus the duration), or -1 before the first."""

    __slots__ = ()
    _what = "Triggers.time_since_last_message's duration"

    def on_element(self, state: int, now_ms: int) -> int:
        return now_ms + self.duration_ms

    def describe(self) -> str:
        return f"time_since_last_message({self.duration_ms} ms)"


class AnyTrigger(Trigger):
    """Fires when any of its triggers fires (then all of them stop, as in Samza). State: the
    list of the triggers' states."""

    __slots__ = ("triggers",)

    def __init__(self, *triggers: Trigger):
        if not triggers:
            raise ValueError("Triggers.any needs at least one trigger")
        for t in triggers:
            if not isinstance(t, Trigger):
                raise ValueError(f"Triggers.any takes triggers (Triggers.count(...), ...), got "
                                 f"{t!r}")
        self.triggers = tuple(triggers)

    def start(self) -> list:
        return [t.start() for t in self.triggers]

    def on_element(self, state: list, now_ms: int) -> list:
        return [t.on_element(s, now_ms) for t, s in zip(self.triggers, state)]

    def should_fire(self, state: list, now_ms: int) -> bool:
        return any(t.should_fire(s, now_ms) for t, s in zip(self.triggers, state))

    def deadline(self, state: list) -> int | None:
        times = [d for t, s in zip(self.triggers, state) if (d := t.deadline(s)) is not None]
        return min(times) if times else None

    def durations(self) -> tuple[int, ...]:
        return tuple(d for t in self.triggers for d in t.durations())

    def describe(self) -> str:
        return f"any({', '.join(t.describe() for t in self.triggers)})"


class RepeatingTrigger(Trigger):
    """Starts its trigger again every time it fires (Samza's ``Triggers.repeat``)."""

    __slots__ = ("trigger",)

    def __init__(self, trigger: Trigger):
        if not isinstance(trigger, Trigger):
            raise ValueError(f"Triggers.repeat takes a trigger, got {trigger!r}")
        self.trigger = trigger

    def start(self) -> Any:
        return self.trigger.start()

    def on_element(self, state: Any, now_ms: int) -> Any:
        return self.trigger.on_element(state, now_ms)

    def should_fire(self, state: Any, now_ms: int) -> bool:
        return self.trigger.should_fire(state, now_ms)

    def deadline(self, state: Any) -> int | None:
        return self.trigger.deadline(state)

    def after_fire(self) -> Any:
        return self.trigger.start()

    def durations(self) -> tuple[int, ...]:
        return self.trigger.durations()

    def describe(self) -> str:
        return f"repeat({self.trigger.describe()})"


class Triggers:
    """Factories of triggers, named as Samza's ``Triggers`` (in snake case)."""

    @staticmethod
    def count(count: int) -> Trigger:
        """Fires when ``count`` elements arrived."""
        return CountTrigger(count)

    @staticmethod
    def time_since_first_message(duration: Any) -> Trigger:
        """Fires ``duration`` (ms or timedelta, processing time) after the first element."""
        return TimeSinceFirstMessageTrigger(duration)

    @staticmethod
    def time_since_last_message(duration: Any) -> Trigger:
        """Fires when no element arrived for ``duration`` (ms or timedelta, processing time)."""
        return TimeSinceLastMessageTrigger(duration)

    @staticmethod
    def any(*triggers: Trigger) -> Trigger:
        """Fires when any of ``triggers`` fires."""
        return AnyTrigger(*triggers)

    @staticmethod
    def repeat(trigger: Trigger) -> Trigger:
        """``trigger`` started again after every firing."""
        return RepeatingTrigger(trigger)
