"""The high-level API for application modules: ``from weir.app import StreamApplication, ...``.

See docs/APPLICATIONS.md; the code lives in :mod:`weir.engine.app`.
"""

from weir.engine.app import (KV, Aggregate, ApplicationDescriptor, ApplicationError,
                             MessageStream, OutputStream, StreamApplication, Table, WindowPane,
                             Windows, WindowSpec, collecting, count, summing)

__all__ = ["KV", "Aggregate", "ApplicationDescriptor", "ApplicationError", "MessageStream",
           "OutputStream", "StreamApplication", "Table", "WindowPane", "Windows", "WindowSpec",
           "collecting", "count", "summing"]
