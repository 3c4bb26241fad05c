"""Registering Weir's Python data sources with a Spark session.

``spark.dataSource.register`` is PySpark's public way to plug Python code into Spark's reader and
writer API (``pyspark.sql.datasource``, PySpark 4.0+): after :func:`register_data_sources`,

* ``spark.read.format("weirstate")`` and ``"weirstate-metadata"`` read an operator's state, its
  change feed and its metadata (:mod:`weir.engine.spark.statesource`);
* ``spark.readStream.format("weirlog")`` reads a job's file-log inputs and
  ``df.writeStream.format("weirlog")`` writes to the file log, once per batch id
  (:mod:`weir.engine.spark.logsource`; ``weir run --runner spark`` uses both).

:func:`weir.engine.spark.session.spark_session` registers them; call this for a session made
elsewhere. Registration is per session and cheap; doing it twice is harmless.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register_data_sources", "DATA_SOURCE_NAMES"]

DATA_SOURCE_NAMES = ("weirstate", "weirstate-metadata", "weirlog")


def register_data_sources(spark: Any) -> None:
    """Register Weir's data sources (:data:`DATA_SOURCE_NAMES`) with ``spark``."""
    from weir.engine.spark.logsource import WeirLogDataSource
    from weir.engine.spark.statesource import WeirStateDataSource, WeirStateMetadataDataSource

    for source in (WeirStateDataSource, WeirStateMetadataDataSource, WeirLogDataSource):
        spark.dataSource.register(source)
