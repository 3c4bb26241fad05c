"""Weir on Spark (docs/SPARK.md).

* the **Weir state provider**: :class:`StateOperator`, a keyed stateful operator in a Spark
  streaming plan whose state is kept by Weir stores (RocksDB, LMDB, memory) in the query's
  checkpoint, versioned by batch id;
* :func:`transform_with_state`: an unchanged PySpark ``StatefulProcessor`` on Weir stores;
* ``spark.read.format("weirstate")``: state, change feed and metadata as data sources;
* jobs on Spark: ``weir run job.properties --runner spark``.

Spark's own state store SPI cannot host Python code, so "registered as a Spark state provider"
means Weir's provider registry (:func:`register_state_provider`) and Spark's Python data source
registry (:func:`register_data_sources`); see :mod:`weir.engine.spark.providers`.

Everything that touches PySpark is imported on first use, so ``import weir.engine.spark`` works
without the ``weir[spark]`` extra.
"""

from __future__ import annotations

from weir.stores._lazy import lazy_exports

from weir.engine.spark.errors import (InputPositionError, JavaRuntimeError,
                                      PartitionCountChangedError, SparkError, SparkJobError,
                                      StateFileDamagedError, StateHistoryError,
                                      StateOwnershipError, StatePartitioningError,
                                      StateVariableError)
from weir.engine.spark.providers import (StateProvider, register_state_provider,
                                         state_provider, state_providers,
                                         unregister_state_provider)
from weir.engine.spark.settings import ProviderSettings

_LAZY = {
    "StateOperator": "weir.engine.spark.operator",
    "Placement": "weir.engine.spark.operator",
    "transform_with_state": "weir.engine.spark.transform",
    "OperatorState": "weir.engine.spark.operator",
    "register_data_sources": "weir.engine.spark.sources",
    "spark_session": "weir.engine.spark.session",
    "check_java": "weir.engine.spark.session",
    "warm_up": "weir.engine.spark.session",
    "WarmUp": "weir.engine.spark.session",
}

__all__ = [
    "SparkError", "JavaRuntimeError", "StateFileDamagedError", "StateHistoryError",
    "PartitionCountChangedError", "StateOwnershipError", "StatePartitioningError",
    "InputPositionError", "SparkJobError", "StateVariableError",
    "StateProvider", "register_state_provider", "unregister_state_provider", "state_provider",
    "state_providers", "ProviderSettings",
    *_LAZY,
]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
