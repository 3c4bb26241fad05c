"""The high-level API (a Python counterpart of Samza's StreamApplication) and its planner.

* :mod:`~weir.engine.app.api`: ``StreamApplication``, the descriptor, ``MessageStream`` and its
  operators, ``KV``, output streams and tables;
* :mod:`~weir.engine.app.windows`: tumbling and session windows on event or processing time,
  aggregates, ``WindowPane`` and its pane information;
* :mod:`~weir.engine.app.triggers`: Samza's ``Triggers`` (early and late triggers);
* :mod:`~weir.engine.app.late`: late elements made visible (warnings with counts);
* :mod:`~weir.engine.app.graph`: the operator graph and operator ids;
* :mod:`~weir.engine.app.planner`: ``plan_application``, from the graph to the plan and the
  generated job config; its parts: :mod:`~weir.engine.app.settings` (the ``app.*`` keys),
  :mod:`~weir.engine.app.loader` (``app.class`` and its ``describe``),
  :mod:`~weir.engine.app.stages` (the graph cut into stages),
  :mod:`~weir.engine.app.partitions` (partition counts of intermediate streams, joins and
  tables), :mod:`~weir.engine.app.plan` (``ExecutionPlan``, ``StagePlan``, ``StreamPlan``: the
  plan as data, the streams it creates and each stage's job config);
* :mod:`~weir.engine.app.task`: ``ApplicationTask``, the low-level task that runs the operators;
* :mod:`~weir.engine.app.operators`, :mod:`~weir.engine.app.window_operator`,
  :mod:`~weir.engine.app.join_operators`: the runtime operators;
* :mod:`~weir.engine.app.runner`: plan and run (``weir run`` with ``app.class``).

docs/APPLICATIONS.md is the guide.
"""

from weir.engine.app.api import (KV, ApplicationDescriptor, MessageStream, OutputStream,
                                 StreamApplication, Table, WindowedStream)
from weir.engine.app.errors import ApplicationError, MissingEventTimeError
from weir.engine.app.plan import ExecutionPlan, StagePlan, StreamPlan
from weir.engine.app.planner import plan_application
from weir.engine.app.triggers import Trigger, Triggers
from weir.engine.app.windows import (AccumulationMode, Aggregate, PaneTiming, TimeDomain,
                                     WindowPane, Windows, WindowSpec, collecting, count, summing)

__all__ = [
    "KV", "ApplicationDescriptor", "MessageStream", "OutputStream", "StreamApplication", "Table",
    "WindowedStream", "ApplicationError", "MissingEventTimeError",
    "ExecutionPlan", "StagePlan", "StreamPlan", "plan_application",
    "Trigger", "Triggers",
    "AccumulationMode", "Aggregate", "PaneTiming", "TimeDomain", "WindowPane", "Windows",
    "WindowSpec", "collecting", "count", "summing",
]
