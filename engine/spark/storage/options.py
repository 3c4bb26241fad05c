"""How the object stores and HDFS are reached: :class:`StorageOptions`, from the Hadoop keys a
Spark team already sets for its checkpoints.

Example::

    >>> options = StorageOptions.from_mapping({"spark.hadoop.fs.s3a.endpoint": "minio:9000",
    ...                                        "spark.hadoop.fs.s3a.path.style.access": "true"})
    >>> options.s3_endpoint_url, options.s3_path_style
    ('https://minio:9000', True)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["StorageOptions"]


def _conf(values: Mapping[str, Any], key: str) -> str | None:
    """``key`` as Spark passes Hadoop keys (``spark.hadoop.<key>``) or bare (data source
    options, a Hadoop configuration)."""
    for name in (f"spark.hadoop.{key}", key):
        value = values.get(name)
        if value is not None and str(value).strip():
            return str(value).strip()
    return None


_AZURE_KEY = re.compile(r"^(?:spark\.hadoop\.)?fs\.azure\.account\.key\.([^.]+)\.(?:dfs|blob)\.")


@dataclass(frozen=True)
class StorageOptions:
    """How to reach the object stores and HDFS, from the Hadoop keys a Spark team already sets
    for its checkpoints (``spark.hadoop.fs.s3a.*``, ``spark.hadoop.fs.azure.account.key.*``,
    ``spark.hadoop.fs.gs.project.id``, ``spark.hadoop.dfs.namenode.http-address``); unset
    keys fall back to each client's own defaults (environment, profiles, instance roles).
    Parsed once on the driver; travels to the executors with the operator (secrets stay out
    of ``repr``)."""

    s3_endpoint: str | None = None
    s3_region: str | None = None
    s3_path_style: bool | None = None
    s3_access_key: str | None = field(default=None, repr=False)
    s3_secret_key: str | None = field(default=None, repr=False)
    s3_session_token: str | None = field(default=None, repr=False)
    azure_account_keys: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    gcs_project: str | None = None
    hdfs_http_address: str | None = None

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "StorageOptions":
        """From a Spark conf or any mapping of keys to strings."""
        path_style = _conf(values, "fs.s3a.path.style.access")
        if path_style is not None and path_style.lower() not in ("true", "false"):
            from weir.stores.errors import ConfigError

            raise ConfigError(f"must be true or false, got {path_style!r}",
                              key="spark.hadoop.fs.s3a.path.style.access")
        azure = tuple(sorted((m.group(1), str(v)) for k, v in values.items()
                             if (m := _AZURE_KEY.match(k)) and v))
        return cls(s3_endpoint=_conf(values, "fs.s3a.endpoint"),
                   s3_region=_conf(values, "fs.s3a.endpoint.region"),
                   s3_path_style=None if path_style is None else path_style.lower() == "true",
                   s3_access_key=_conf(values, "fs.s3a.access.key"),
                   s3_secret_key=_conf(values, "fs.s3a.secret.key"),
                   s3_session_token=_conf(values, "fs.s3a.session.token"),
                   azure_account_keys=azure,
                   gcs_project=_conf(values, "fs.gs.project.id"),
                   hdfs_http_address=_conf(values, "dfs.namenode.http-address"))

    @property
    def s3_endpoint_url(self) -> str | None:
        """The S3A endpoint as a URL (S3A accepts a bare host; boto3 needs a scheme)."""
        if not self.s3_endpoint:
            return None
        return self.s3_endpoint if "://" in self.s3_endpoint else f"https://{self.s3_endpoint}"
