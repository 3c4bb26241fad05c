"""The container's stop steps: what starting a container opened, closed in reverse order.

Every step is attempted; a failing step is logged, and re-raised after the others only when
nothing failed before (so a close error never hides the error that stopped the container).

Example::

    >>> done = []
    >>> steps = StopSteps("0")
    >>> steps.callback(lambda: done.append("producers"))
    >>> steps.callback(lambda: done.append("consumers"))
    >>> steps.close_all(failed=False)
    >>> done
    ['consumers', 'producers']
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

__all__ = ["StopSteps"]

log = logging.getLogger("weir.container")


class StopSteps:
    """Stop steps registered while starting, run in reverse order (see the module
    docstring)."""

    def __init__(self, container_id: str):
        self._container_id = container_id
        self._steps: list[Callable[[], Any]] = []

    def callback(self, step: Callable[[], Any]) -> None:
        self._steps.append(step)

    def close_all(self, *, failed: bool) -> None:
        first: BaseException | None = None
        while self._steps:
            step = self._steps.pop()
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - attempt every step
                log.error("container %s: stopping %s failed: %s", self._container_id,
                          getattr(step, "__qualname__", step), exc)
                first = first or exc
        if first is not None and not failed:
            raise first
