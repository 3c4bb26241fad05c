"""Containers and the embedded runner: a container owns the consumers, producers, chooser,
storage and task instances of a set of tasks; the runner starts one per process, supervises
them, and shows the status line.

Names are imported on first use: ``weir run`` imports ``starter`` (the fork server) before the
runner, and a container process needs the container, not the runner's coordinator and
status display.
"""

from __future__ import annotations

from weir.stores._lazy import lazy_exports

_LAZY = {
    "Container": "weir.engine.container.container",
    "ContainerState": "weir.engine.container.container",
    "run_container": "weir.engine.container.container",
    "ContainerFailure": "weir.engine.container.progress",
    "ContainerProgress": "weir.engine.container.progress",
    "ContainerResult": "weir.engine.container.progress",
    "SspPosition": "weir.engine.container.progress",
    "ExitCode": "weir.engine.container.runner",
    "JobResult": "weir.engine.container.runner",
    "prepare_job": "weir.engine.container.runner",
    "run_job": "weir.engine.container.runner",
    "StatusMode": "weir.engine.container.status",
}

__all__ = ["Container", "ContainerState", "run_container",
           "ContainerProgress", "ContainerResult", "SspPosition",
           "ContainerFailure", "ExitCode", "JobResult", "prepare_job", "run_job", "StatusMode"]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
