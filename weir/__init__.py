"""Weir: stateful stream processing for Python, in the lineage of Apache Samza.

This package is the install namespace (``weir.stores``, ``weir.recovery``, ``weir.engine``;
their sources are the repository's ``stores/``, ``recovery/`` and ``engine/`` folders) and
re-exports the public API of all three (each package's ``__all__``: one list, kept by the
package that defines the names), so a task module imports from one place. The task API is
imported eagerly; everything else loads on first use.

Example::

    >>> from weir import OutgoingMessageEnvelope, StreamTask, SystemStream
    >>> OUT = SystemStream("filelog", "upper")
    >>> class Upper(StreamTask):
    ...     def process(self, envelope, collector, coordinator):
    ...         collector.send(OutgoingMessageEnvelope(OUT, envelope.message.upper()))
"""

from __future__ import annotations

from weir.stores._lazy import lazy_exports

from weir.engine.errors import (
    CallbackTimeoutError,
    CorruptRecordError,
    DeserializationError,
    EngineError,
    StreamNotFoundError,
    TaskError,
)
from weir.engine.model import (
    NO_TIMESTAMP,
    IncomingMessageEnvelope,
    OutgoingMessageEnvelope,
    SystemStream,
    SystemStreamPartition,
    TaskName,
)
from weir.engine.task import (
    AsyncStreamTask,
    ClosableTask,
    EndOfStreamListenerTask,
    InitableTask,
    MessageCollector,
    RequestScope,
    ShutdownScope,
    StreamTask,
    TaskCallback,
    TaskContext,
    TaskCoordinator,
    TaskWrapper,
    WindowableTask,
    WatermarkListenerTask,
    DrainListenerTask,
)
from weir.stores.api import KeyValueIterator, KeyValueStore, ReadOnlyKeyValueStore
from weir.stores.errors import (
    ConfigError,
    NullKeyOrValueError,
    ReadOnlyStoreError,
    StoreClosedError,
    StoreError,
    WeirError,
)
from weir.stores.serdes import Serde

import weir.engine as _engine
import weir.recovery as _recovery
import weir.stores as _stores

__version__ = _engine.__version__

# Every public name of the three packages, from the package that defines it (a name two
# packages export is the same object in both; tests/test_packaging.py checks).
_LAZY: dict[str, str] = {}
for _package in (_engine, _recovery, _stores):
    for _name in _package.__all__:
        if _name != "__version__" and _name not in globals():
            _LAZY.setdefault(_name, _package.__name__)
del _package, _name

__all__ = ["__version__", *sorted({*_engine.__all__, *_recovery.__all__, *_stores.__all__}
                                  - {"__version__"})]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
