"""The control plane of a container: which tasks get control bookkeeping, and one drain monitor.

The container asks :meth:`ControlPlane.task_control` for every task it builds. A task gets a
:class:`~weir.engine.control.task_control.TaskControl` when it reads an intermediate stream
(``streams.<id>.samza.intermediate=true``) or defines a control method (``on_watermark``,
``on_drain``, ``on_stream_*``); every other task gets ``None`` and runs exactly as before,
with no cost. The bookkeeping is restored from the checkpoint's ``extras["control"]``.

Example::

    >>> from weir.stores.config import Config
    >>> from weir.engine.model import SystemStreamPartition as SSP
    >>> cfg = Config({"streams.p1.samza.system": "filelog", "streams.p1.samza.intermediate": "true",
    ...               "streams.p1.intermediate.upstream.tasks": "2"})
    >>> plane = ControlPlane(cfg)
    >>> control = plane.task_control("Partition 0", [SSP("filelog", "p1", 0)], task=object())
    >>> control.eos.expected(SSP("filelog", "p1", 0))
    2
    >>> plane.task_control("Partition 0", [SSP("filelog", "clicks", 0)], task=object()) is None
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from weir.stores.config import Config

from weir.engine.control.drain import DrainMonitor
from weir.engine.control.settings import ControlSettings, is_intermediate, upstream_task_count
from weir.engine.control.task_control import CHECKPOINT_KEY, ControlHooks, TaskControl, wallclock_ms
from weir.engine.model import SystemStream, SystemStreamPartition

__all__ = ["ControlPlane"]


class ControlPlane:
    """Builds the tasks' control bookkeeping for one container (see the module docstring)."""

    def __init__(self, config: Config | Mapping[str, str], *, checkpoint_dir: Path | None = None,
                 settings: ControlSettings | None = None,
                 clock_ms: Callable[[], int] = wallclock_ms):
        self.config = config if isinstance(config, Config) else Config(config)
        # Parsed once by the container (JobSettings.control); parsed here when built alone.
        self.settings = settings if settings is not None else ControlSettings.from_config(
            self.config, checkpoint_dir=checkpoint_dir)
        self.monitor = DrainMonitor(self.settings.drain_path, self.settings.drain_poll_ms)
        self._clock_ms = clock_ms
        self._streams: dict[SystemStream, tuple[bool, int | None]] = {}

    def stream(self, ss: SystemStream) -> tuple[bool, int | None]:
        """``(is intermediate, upstream task count or None)`` of a stream, cached."""
        info = self._streams.get(ss)
        if info is None:
            inter = is_intermediate(self.config, ss)
            info = self._streams[ss] = (inter, upstream_task_count(self.config, ss) if inter else None)
        return info

    def task_control(self, task_name: str, ssps: Iterable[SystemStreamPartition], *,
                     task: Any, extras: Mapping[str, Any] | None = None) -> TaskControl | None:
        """The bookkeeping of one task, restored from its checkpoint's ``extras``; None when
        the task needs none."""
        ssps = [SystemStreamPartition(*s) for s in ssps]
        intermediate = {}
        for ssp in ssps:
            inter, count = self.stream(ssp.system_stream)
            if inter:
                intermediate[ssp] = count
        if not intermediate and not ControlHooks(task).any:
            return None
        control = TaskControl(task_name, ssps, intermediate=intermediate, settings=self.settings,
                              monitor=self.monitor, task=task, clock_ms=self._clock_ms)
        control.restore((extras or {}).get(CHECKPOINT_KEY))
        return control
