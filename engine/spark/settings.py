"""The settings of Weir on Spark, declared once and parsed into frozen values at the edge.

The provider's keys live in the Spark session's conf (``spark.conf``) for Spark pipelines, and
in the job config for ``weir run --runner spark`` (which copies every ``spark.*`` key of the job
config into the Spark session it builds). :meth:`ProviderSettings.from_mapping` reads either
(any mapping of key -> string); the result travels to the executors inside the pickled
operator, so tasks never read config.

Example::

    >>> s = ProviderSettings.from_mapping({"spark.weir.state.provider": "lmdb",
    ...                                    "spark.weir.state.snapshot.interval": "5"})
    >>> s.provider, s.snapshot_interval, s.min_versions_to_retain
    ('lmdb', 5, 100)
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from weir.stores.config import Config, declare
from weir.stores.errors import ConfigError

from weir.engine.spark.storage import StorageOptions

__all__ = [
    "SPARK_WEIR_STATE_PROVIDER",
    "SPARK_WEIR_STATE_SNAPSHOT_INTERVAL",
    "SPARK_WEIR_STATE_MIN_VERSIONS_TO_RETAIN",
    "SPARK_WEIR_STATE_LOCAL_DIR",
    "SPARK_WEIR_STATE_ORPHAN_AGE_MS",
    "SPARK_WEIR_STATE_COMPRESSION_LEVEL",
    "SPARK_WEIR_MAX_RECORDS_PER_BATCH",
    "SPARK_WEIR_TRIGGER_INTERVAL_MS",
    "SPARK_MASTER",
    "OBJECT_STORE_KEYS",
    "AZURE_ACCOUNT_KEY",
    "ProviderSettings",
    "conf_value",
]

_C = "spark"

SPARK_WEIR_STATE_PROVIDER = declare(
    "spark.weir.state.provider", str, "rocksdb",
    "State provider (engine) of the stores of Weir's Spark operators when a store does not name "
    "one with stores.<s>.factory: rocksdb, lmdb, memory, or a name registered with "
    "weir.spark.register_state_provider. Read from the Spark session conf.",
    component=_C)
SPARK_WEIR_STATE_SNAPSHOT_INTERVAL = declare(
    "spark.weir.state.snapshot.interval", int, 10,
    "A state partition writes a snapshot of its whole state every this many versions (micro-"
    "batches); loading a version replays at most this many changelogs after the newest snapshot. "
    "Spark's own spark.sql.streaming.stateStore.minDeltasForSnapshot has the same default.",
    component=_C)
SPARK_WEIR_STATE_MIN_VERSIONS_TO_RETAIN = declare(
    "spark.weir.state.min.versions.to.retain", int, 100,
    "Versions of every state partition that stay loadable (restarts, replays, time travel with "
    "the weirstate data source); older changelogs and snapshots are deleted once a newer "
    "snapshot covers them (two snapshots are always kept so a damaged one can be rebuilt). "
    "Spark's spark.sql.streaming.minBatchesToRetain has the same default.",
    component=_C)
SPARK_WEIR_STATE_LOCAL_DIR = declare(
    "spark.weir.state.local.dir", str, None,
    "Directory on each executor for the local replicas of state partitions (default: "
    "<temp dir>/weir-spark-state). Replicas are caches of the checkpoint's versions: deleting "
    "them loses nothing.",
    component=_C)
SPARK_WEIR_STATE_ORPHAN_AGE_MS = declare(
    "spark.weir.state.orphan.age.ms", int, 3_600_000,
    "Temp files of failed publish attempts older than this are removed from the checkpoint by "
    "later tasks (a temp file of a dead process on the same host goes at once).",
    component=_C)
SPARK_WEIR_STATE_COMPRESSION_LEVEL = declare(
    "spark.weir.state.compression.level", int, 3,
    "zstd level of changelog and snapshot files (1-22).",
    component=_C)
SPARK_WEIR_MAX_RECORDS_PER_BATCH = declare(
    "spark.weir.max.records.per.batch", int, 100_000,
    "Jobs on Spark: most input records admitted into one micro-batch over all of the job's input "
    "partitions (0: everything available). The default bounds what a killed driver or a failed "
    "batch redoes and how long a backlog's first batch holds back the records behind it (a "
    "second or two of Weir's work per batch on one core).",
    component=_C)
SPARK_WEIR_TRIGGER_INTERVAL_MS = declare(
    "spark.weir.trigger.interval.ms", int, 0,
    "Jobs on Spark: processing-time trigger interval of the query (0: start the next micro-batch "
    "as soon as the previous one ends). `--trigger available-now` overrides it.",
    component=_C)
SPARK_MASTER = declare(
    "spark.master", str, "local[*]",
    "Jobs on Spark: the Spark master `weir run --runner spark` connects to (local[*] runs Spark "
    "inside this machine's JVM). Every other spark.* key of the job config is passed to the Spark "
    "session as it is.",
    component=_C)

_HADOOP = ("Hadoop's own key, as Spark passes it (spark.hadoop.<key>); Weir reads it too, for "
           "checkpoint locations on ")
OBJECT_STORE_KEYS = (
    declare("spark.hadoop.fs.s3a.endpoint", str, None,
            _HADOOP + "S3 (s3a://): the endpoint of an S3-compatible store (a host or URL). "
            "Unset: AWS (or AWS_ENDPOINT_URL).", component=_C),
    declare("spark.hadoop.fs.s3a.endpoint.region", str, None,
            _HADOOP + "S3: the signing region. Unset: the AWS environment's.", component=_C),
    declare("spark.hadoop.fs.s3a.path.style.access", str, None,
            _HADOOP + "S3: true for path-style requests (most S3-compatible stores), false for "
            "virtual-host style. Unset: boto3's choice.", component=_C),
    declare("spark.hadoop.fs.s3a.access.key", str, None,
            _HADOOP + "S3: access key id. Unset: the AWS credential chain (environment, "
            "profile, instance role).", component=_C),
    declare("spark.hadoop.fs.s3a.secret.key", str, None,
            _HADOOP + "S3: secret access key (with fs.s3a.access.key).", component=_C),
    declare("spark.hadoop.fs.s3a.session.token", str, None,
            _HADOOP + "S3: session token of temporary credentials.", component=_C),
    declare("spark.hadoop.dfs.namenode.http-address", str, None,
            _HADOOP + "HDFS (hdfs://): host:port of the NameNode's HTTP endpoint, where Weir "
            "reaches WebHDFS (https://host:port when dfs.http.policy is HTTPS_ONLY). Unset: the "
            "location's NameNode host, port 9870. The HDFS user is HADOOP_USER_NAME (simple "
            "authentication; Kerberos is not supported).", component=_C),
    declare("spark.hadoop.fs.gs.project.id", str, None,
            _HADOOP + "Google Cloud Storage (gs://): the project. Unset: the application "
            "default credentials' project.", component=_C),
)
AZURE_ACCOUNT_KEY = declare(
    "spark.hadoop.fs.azure.account.key.<account>.dfs.core.windows.net", str, None,
    _HADOOP + "Azure Data Lake Storage (abfss://): the shared key of storage account "
    "<account>. Unset: adlfs's defaults (AZURE_STORAGE_* environment, DefaultAzureCredential).",
    component=_C)

_SPARK_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def conf_value(conf: Any, key: str) -> str | None:
    """``key`` from a Spark ``RuntimeConfig`` (``spark.conf``) or a mapping; None when unset."""
    if isinstance(conf, Mapping):
        value = conf.get(key)
        return None if value is None else str(value)
    try:
        value = conf.get(key, None)
    except Exception:  # noqa: BLE001 - an unset key without default raises in some versions
        return None
    return None if value is None else str(value)


@dataclass(frozen=True)
class ProviderSettings:
    """What the Weir state provider needs, parsed once on the driver."""

    provider: str = "rocksdb"
    snapshot_interval: int = 10
    min_versions_to_retain: int = 100
    local_dir: str | None = None
    orphan_age_ms: int = 3_600_000
    compression_level: int = 3
    storage: StorageOptions = StorageOptions()
    """How to reach an object store checkpoint (the ``spark.hadoop.fs.*`` keys)."""

    def __post_init__(self) -> None:
        if self.snapshot_interval < 1:
            raise ConfigError(f"must be at least 1, got {self.snapshot_interval}",
                              key=SPARK_WEIR_STATE_SNAPSHOT_INTERVAL.name)
        if self.min_versions_to_retain < 1:
            raise ConfigError(f"must be at least 1, got {self.min_versions_to_retain}",
                              key=SPARK_WEIR_STATE_MIN_VERSIONS_TO_RETAIN.name)
        if not 1 <= self.compression_level <= 22:
            raise ConfigError(f"must be between 1 and 22, got {self.compression_level}",
                              key=SPARK_WEIR_STATE_COMPRESSION_LEVEL.name)

    @property
    def local_root(self) -> str:
        """Where replicas go on this machine."""
        return self.local_dir or os.path.join(tempfile.gettempdir(), "weir-spark-state")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | Config) -> "ProviderSettings":
        """From a job config or any mapping of Spark conf keys to strings."""
        config = values if isinstance(values, Config) else Config(
            {k: v for k, v in values.items() if v is not None})
        return cls(
            provider=(SPARK_WEIR_STATE_PROVIDER.get(config) or "rocksdb").lower(),
            snapshot_interval=SPARK_WEIR_STATE_SNAPSHOT_INTERVAL.get(config),
            min_versions_to_retain=SPARK_WEIR_STATE_MIN_VERSIONS_TO_RETAIN.get(config),
            local_dir=SPARK_WEIR_STATE_LOCAL_DIR.get(config),
            orphan_age_ms=SPARK_WEIR_STATE_ORPHAN_AGE_MS.get(config),
            compression_level=SPARK_WEIR_STATE_COMPRESSION_LEVEL.get(config),
            storage=StorageOptions.from_mapping(config))

    @classmethod
    def from_spark(cls, spark: Any) -> "ProviderSettings":
        """From the conf of a SparkSession (``spark.weir.*`` keys)."""
        keys = [SPARK_WEIR_STATE_PROVIDER, SPARK_WEIR_STATE_SNAPSHOT_INTERVAL,
                SPARK_WEIR_STATE_MIN_VERSIONS_TO_RETAIN, SPARK_WEIR_STATE_LOCAL_DIR,
                SPARK_WEIR_STATE_ORPHAN_AGE_MS, SPARK_WEIR_STATE_COMPRESSION_LEVEL]
        values = {}
        for key in [*keys, *OBJECT_STORE_KEYS]:
            value = conf_value(spark.conf, key.name)
            if value is not None:
                values[key.name] = value
        values.update(_azure_keys(spark))
        return cls.from_mapping(values)


def _azure_keys(spark: Any) -> dict[str, str]:
    """The session's ``spark.hadoop.fs.azure.account.key.*`` keys (names carry the account)."""
    try:
        everything = spark.conf.getAll
        items = everything.items() if isinstance(everything, Mapping) else everything().items()
    except Exception:  # noqa: BLE001 - an older RuntimeConfig without getAll
        return {}
    return {k: v for k, v in items if k.startswith("spark.hadoop.fs.azure.account.key.")}


def default_partitions(spark: Any) -> int:
    """``spark.sql.shuffle.partitions`` of the session: the state partition count an operator
    gets when none is given (Spark's own stateful operators use it the same way)."""
    raw = conf_value(spark.conf, _SPARK_SHUFFLE_PARTITIONS)
    try:
        return int(raw) if raw is not None else 200
    except ValueError:
        raise ConfigError(f"is not an integer: {raw!r}", key=_SPARK_SHUFFLE_PARTITIONS) from None


__all__ += ["default_partitions"]
