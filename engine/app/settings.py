"""The application's config keys and the names the planner and its task share.

``app.class`` marks a job as an application (:func:`is_application`); ``app.name``/``app.id``
name its streams and stores (:func:`app_identity`); ``app.stage`` runs one stage as its own
job; ``app.store.factory`` and ``job.intermediate.stream.partitions`` shape the plan
(:mod:`~weir.engine.app.planner`).

Example::

    >>> from weir.stores.config import Config
    >>> app_identity(Config({"app.class": "my.app:Counts", "job.name": "counts"}))
    ('counts', '1')
    >>> is_application(Config({"task.class": "my.task:Counter"}))
    False
"""

from __future__ import annotations

from weir.stores.config import Config, declare

from weir.engine.config.job import JOB_ID, JOB_NAME

__all__ = [
    "APP_CLASS", "APP_NAME", "APP_ID", "APP_STAGE", "APP_STORE_FACTORY",
    "JOB_INTERMEDIATE_STREAM_PARTITIONS", "MAX_INFERRED_PARTITIONS", "MAX_TRIGGER_TIMER_MS",
    "APPLICATION_TASK", "PLAN_ORIGIN", "is_application", "app_identity",
]

_C = "application"
APP_CLASS = declare(
    "app.class", str, None,
    "The high-level application: `module:Name` of a StreamApplication class (or of a function "
    "taking the application descriptor). `weir run` and `weir plan` plan it into stages.",
    component=_C)
APP_NAME = declare(
    "app.name", str, None,
    "Name used in the application's stream and store names (`<app.name>-<app.id>-...`); "
    "default `job.name`.", component=_C)
APP_ID = declare("app.id", str, None, "Instance id in stream and store names; default `job.id`.",
                 component=_C)
APP_STAGE = declare(
    "app.stage", int, -1,
    "Run only this stage of the application, as its own job (`weir run --stage N` sets it); "
    "-1 runs every stage in one job.", component=_C)
APP_STORE_FACTORY = declare(
    "app.store.factory", str, "rocksdb",
    "Engine of the stores the planner adds for windows, joins and tables (`stores.<store>.*` "
    "keys in the config win).", component=_C)
JOB_INTERMEDIATE_STREAM_PARTITIONS = declare(
    "job.intermediate.stream.partitions", int, -1,
    "Partition count of intermediate streams (Samza's key); -1 infers it: the partition count "
    "of a join's other inputs, else the largest of the application's input and output "
    "streams, at most 256.", component=_C)

MAX_INFERRED_PARTITIONS = 256
MAX_TRIGGER_TIMER_MS = 100
"""The longest ``task.window.ms`` the planner generates for processing-time windows and
time-based triggers: a pane is emitted at most this long after its processing-time deadline."""
APPLICATION_TASK = "weir.engine.app.task:ApplicationTask"
PLAN_ORIGIN = "application plan"
"""The origin the generated config's keys carry (``weir config show`` prints it)."""


def is_application(config: Config) -> bool:
    return bool(APP_CLASS.get(config))


def app_identity(config: Config) -> tuple[str, str]:
    """``(app name, app id)``: ``app.name``/``app.id``, else ``job.name``/``job.id``."""
    name = APP_NAME.get(config) or config.require(JOB_NAME.name)
    return name, APP_ID.get(config) or JOB_ID.get(config)
