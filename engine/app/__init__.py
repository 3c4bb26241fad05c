"""The high-level API (a Python counterpart of Samza's StreamApplication) and its planner.

* :mod:`~weir.engine.app.api`: ``StreamApplication``, the descriptor, ``MessageStream`` and its
  operators, ``KV``, output streams and tables;
* :mod:`~weir.engine.app.windows`: tumbling and session windows, aggregates, ``WindowPane``;
* :mod:`~weir.engine.app.graph`: the operator graph and operator ids;
* :mod:`~weir.engine.app.planner`: stages, intermediate streams, partition counts, job configs;
* :mod:`~weir.engine.app.task`: ``ApplicationTask``, the low-level task that runs the operators;
* :mod:`~weir.engine.app.operators`, :mod:`~weir.engine.app.window_operator`,
  :mod:`~weir.engine.app.join_operators`: the runtime operators;
* :mod:`~weir.engine.app.runner`: plan and run (``weir run`` with ``app.class``).

docs/APPLICATIONS.md is the guide.
"""

from weir.engine.app.api import (KV, ApplicationDescriptor, MessageStream, OutputStream,
                                 StreamApplication, Table)
from weir.engine.app.errors import ApplicationError, MissingEventTimeError
from weir.engine.app.planner import ExecutionPlan, StagePlan, StreamPlan, plan_application
from weir.engine.app.windows import (Aggregate, WindowPane, Windows, WindowSpec, collecting, count,
                                     summing)

__all__ = [
    "KV", "ApplicationDescriptor", "MessageStream", "OutputStream", "StreamApplication", "Table",
    "ApplicationError", "MissingEventTimeError",
    "ExecutionPlan", "StagePlan", "StreamPlan", "plan_application",
    "Aggregate", "WindowPane", "Windows", "WindowSpec", "collecting", "count", "summing",
]
