"""The TaskCoordinator of a task's calls: :class:`Coordinator` records commit and shutdown
requests; the run loop takes them after the call that made them has finished.

Example::

    >>> from weir.engine.task import RequestScope
    >>> c = Coordinator()
    >>> c.commit(); c.requested
    True
    >>> c.take()
    (<RequestScope.CURRENT_TASK: 'current-task'>, None)
"""

from __future__ import annotations

from collections.abc import Callable

from weir.engine.task import RequestScope

__all__ = ["Coordinator"]


def _wider(current: RequestScope | None, scope: RequestScope) -> RequestScope:
    if not isinstance(scope, RequestScope):
        raise TypeError(f"scope must be a RequestScope (ShutdownScope), got {scope!r}")
    if current is RequestScope.ALL_TASKS_IN_CONTAINER:
        return current
    return scope


class Coordinator:
    """The TaskCoordinator given to task calls. Requests are recorded here and take effect
    when the run loop takes them (after the call that made them has finished)."""

    __slots__ = ("commit_scope", "shutdown_scope", "requested", "_notify")

    def __init__(self, notify: Callable[[], None] | None = None):
        self.commit_scope: RequestScope | None = None
        self.shutdown_scope: RequestScope | None = None
        self.requested = False
        self._notify = notify

    def commit(self, scope: RequestScope = RequestScope.CURRENT_TASK) -> None:
        self.commit_scope = _wider(self.commit_scope, scope)
        self.requested = True
        if self._notify is not None:
            self._notify()

    def shutdown(self, scope: RequestScope) -> None:
        self.shutdown_scope = _wider(self.shutdown_scope, scope)
        self.requested = True
        if self._notify is not None:
            self._notify()

    def take(self) -> tuple[RequestScope | None, RequestScope | None]:
        """``(commit scope, shutdown scope)`` requested so far, and forget them."""
        out = (self.commit_scope, self.shutdown_scope)
        self.commit_scope = self.shutdown_scope = None
        self.requested = False
        return out
