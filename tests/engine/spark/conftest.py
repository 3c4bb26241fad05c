"""The Spark tests need the ``weir[spark]`` extra and a Java runtime 17 or newer.

``.ci/run`` installs the extra. Without it, the modules that import PySpark, pandas or pyarrow
are not collected; without a usable Java, the tests marked ``spark`` are skipped with Weir's own
message saying what to install (``-ra`` prints it). ``WEIR_REQUIRE_SPARK=1`` turns both into
failures (for a CI that must run them).
"""

from __future__ import annotations

import importlib.util
import os

import pytest

_MISSING = [m for m in ("pyspark", "pyarrow", "pandas") if importlib.util.find_spec(m) is None]
_REQUIRED = os.environ.get("WEIR_REQUIRE_SPARK") == "1"

if _MISSING and _REQUIRED:
    raise pytest.UsageError(f"WEIR_REQUIRE_SPARK=1 but {', '.join(_MISSING)} is not installed: "
                            f"pip install -e '.[test,spark]'")

_CONNECT_MISSING = [m for m in ("grpc", "google.rpc") if importlib.util.find_spec(m.split(".")[0])
                    is None]

collect_ignore = ["test_jobtask.py", "test_logsink.py", "test_operator_spark.py",
                  "test_processor.py", "test_transform_spark.py", "test_statesource.py",
                  "test_jobrunner_spark.py", "test_connect_spark.py", "test_handover.py",
                  "test_session_spark.py"] \
    if _MISSING else []
if _CONNECT_MISSING and not _REQUIRED:
    collect_ignore.append("test_connect_spark.py")


@pytest.fixture(scope="session")
def s3_server():
    """One S3-compatible server (moto, server mode) on loopback for the whole test session."""
    pytest.importorskip("moto", reason="the object-store tests need moto[server] (in the test "
                                       "extra): pip install -e '.[test,spark]'")
    pytest.importorskip("boto3", reason="the object-store tests need boto3 (test extra)")
    from tests.engine.spark._s3server import start_s3_server

    server = start_s3_server()
    yield server
    server.stop()


def pytest_collection_modifyitems(config, items):
    marked = [item for item in items if item.get_closest_marker("spark")]
    if not marked:
        return
    from weir.engine.spark.errors import SparkError
    from weir.engine.spark.session import check_spark_environment

    try:
        check_spark_environment()
    except SparkError as exc:
        if _REQUIRED:
            raise pytest.UsageError(f"WEIR_REQUIRE_SPARK=1 but Spark cannot start: {exc}") from exc
        skip = pytest.mark.skip(reason=f"Spark cannot start here: {exc}")
        for item in marked:
            item.add_marker(skip)
