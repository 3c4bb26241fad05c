"""Running an application: plan it, create its streams, run its job(s) on the embedded runner.

``weir run app.properties`` (a config with ``app.class``) calls :func:`run_application`: the
plan's job config runs every stage in one job; ``--stage N`` (or ``app.stage=N``) runs only
stage ``N`` as a job of its own, so an application can be split into one process per stage
(start them in any order: a downstream stage waits for its intermediate streams). The job ends
by itself when every input, direct and intermediate, has ended.

Example::

    result = run_application(load_config("pageviews.properties"))
    sys.exit(result.exit_code)
"""

from __future__ import annotations

from typing import Any

from weir.stores.config import Config

from weir.engine.app.plan import ExecutionPlan
from weir.engine.app.planner import plan_application
from weir.engine.app.settings import APP_STAGE
from weir.engine.container.runner import JobResult, run_job

__all__ = ["prepare_application", "run_application"]


def prepare_application(config: Config, *, stage: int | None = None,
                        registry: Any = None) -> tuple[ExecutionPlan, Config]:
    """Plan, create the intermediate (and declared output) streams, and return the plan and
    the job config to run (``stage`` None: ``app.stage`` from the config)."""
    plan = plan_application(config, registry)
    plan.create_streams()
    if stage is None:
        stage = APP_STAGE.get(config)
    return plan, plan.job_config(stage if stage >= 0 else None)


def run_application(config: Config, *, stage: int | None = None, **kwargs: Any) -> JobResult:
    """Plan and run (see the module docstring); ``kwargs`` go to
    :func:`~weir.engine.container.runner.run_job` (status, console, progress)."""
    _, job_config = prepare_application(config, stage=stage)
    return run_job(job_config, **kwargs)
