"""Containers and the embedded runner: a container owns the consumers, producers, chooser,
storage and task instances of a set of tasks; the runner starts one per process, supervises
them, and shows the status line."""

from weir.engine.container.container import Container, ContainerState, run_container
from weir.engine.container.progress import ContainerProgress, ContainerResult, SspPosition
from weir.engine.container.runner import ContainerFailure, ExitCode, JobResult, prepare_job, run_job
from weir.engine.container.status import StatusMode

__all__ = ["Container", "ContainerState", "run_container",
           "ContainerProgress", "ContainerResult", "SspPosition",
           "ContainerFailure", "ExitCode", "JobResult", "prepare_job", "run_job", "StatusMode"]
