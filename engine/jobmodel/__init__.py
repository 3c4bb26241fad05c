"""The job model: which container runs which tasks, which task reads which input partitions,
and which changelog partition each task writes (Samza's JobModel, same JSON; docs/COORDINATOR.md)."""

from weir.engine.jobmodel.model import (
    ContainerModel,
    JobModel,
    JobModelError,
    SspGrouper,
    TaskMode,
    TaskModel,
    build_job_model,
    group_ssps,
    task_name_for_partition,
    task_name_for_ssp,
)

__all__ = ["ContainerModel", "JobModel", "JobModelError", "SspGrouper", "TaskMode", "TaskModel",
           "build_job_model", "group_ssps", "task_name_for_partition", "task_name_for_ssp"]
