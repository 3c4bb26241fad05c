"""The high-level API for application modules: ``from weir.app import StreamApplication, ...``.

See docs/APPLICATIONS.md; the code lives in :mod:`weir.engine.app`.
"""

from weir.engine.app import (KV, AccumulationMode, Aggregate, ApplicationDescriptor,
                             ApplicationError, MessageStream, OutputStream, PaneTiming,
                             StreamApplication, Table, TimeDomain, Trigger, Triggers,
                             WindowedStream, WindowPane, Windows, WindowSpec, collecting, count,
                             summing)

__all__ = ["KV", "AccumulationMode", "Aggregate", "ApplicationDescriptor", "ApplicationError",
           "MessageStream", "OutputStream", "PaneTiming", "StreamApplication", "Table",
           "TimeDomain", "Trigger", "Triggers", "WindowedStream", "WindowPane", "Windows",
           "WindowSpec", "collecting", "count", "summing"]
