"""Starting Spark for Weir: the checks before the JVM starts, and the session builder.

PySpark needs a Java runtime (Spark 4 needs Java 17 or newer) and, for Weir, the packages of the
``weir[spark]`` extra. Without them PySpark fails deep inside py4j ("Java gateway process exited
before sending its port number"); :func:`check_spark_environment` says instead what is missing
and how to install it.

Example::

    >>> java_major('openjdk version "17.0.15" 2025-04-15')
    17
    >>> java_major('java version "1.8.0_402"')
    8
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from weir.engine.spark.errors import JavaRuntimeError, SparkError

__all__ = ["JAVA_MIN_MAJOR", "PYSPARK_MIN", "WORKER_SAFE_PATH", "java_major", "find_java", "check_java",
           "check_pyspark", "check_spark_environment", "spark_session", "worker_python_path",
           "warm_up", "WarmUp", "WORKER_MODULES", "task_slots"]

JAVA_MIN_MAJOR = 17
PYSPARK_MIN = (4, 2)
_INSTALL_JAVA = ("install a Java runtime, version 17 or newer (Debian/Ubuntu: `apt-get install "
                 "openjdk-17-jre-headless`; macOS: `brew install openjdk@17`; or a build from "
                 "https://adoptium.net), then put its `java` on PATH or set JAVA_HOME to its "
                 "directory")
_INSTALL_EXTRA = "pip install 'weir[spark]'"
WORKER_SAFE_PATH = "PYTHONSAFEPATH"
"""Set for Spark's Python workers (``spark.executorEnv.PYTHONSAFEPATH=1``): they never import
from their working directory (see :func:`spark_session`)."""


def java_major(version_text: str) -> int | None:
    """The major version in ``java -version`` output (``1.8`` is 8)."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if m is None:
        return None
    major = int(m.group(1))
    if major == 1 and m.group(2) is not None:
        return int(m.group(2))
    return major


def find_java() -> Path | None:
    """``$JAVA_HOME/bin/java`` when JAVA_HOME is set (what PySpark starts), else ``java`` on
    PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        return candidate if candidate.exists() else None
    found = shutil.which("java")
    return Path(found) if found else None


def check_java(minimum: int = JAVA_MIN_MAJOR) -> int:
    """The Java major version PySpark will start; JavaRuntimeError naming what to install when
    there is none or it is too old."""
    java = find_java()
    if java is None:
        where = (f"JAVA_HOME={os.environ['JAVA_HOME']} has no bin/java"
                 if os.environ.get("JAVA_HOME") else "no `java` on PATH and JAVA_HOME is not set")
        raise JavaRuntimeError(f"Spark needs a Java runtime and there is none ({where}); "
                               f"{_INSTALL_JAVA}")
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaRuntimeError(f"{java} -version failed ({exc}); {_INSTALL_JAVA}") from exc
    major = java_major(done.stderr + done.stdout)
    if major is None:
        raise JavaRuntimeError(f"cannot tell the version of {java} from `java -version` "
                               f"({(done.stderr or done.stdout).strip()[:200]!r}); {_INSTALL_JAVA}")
    if major < minimum:
        raise JavaRuntimeError(f"{java} is Java {major}; Spark 4 needs Java {minimum} or newer: "
                               f"{_INSTALL_JAVA}")
    return major


def check_pyspark() -> str:
    """PySpark's version; SparkError naming the extra to install when PySpark (or one of the
    packages Weir's Spark code needs) is missing or too old."""
    missing = []
    for module in ("pyspark", "pyarrow", "pandas"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise SparkError(f"running on Spark needs {', '.join(missing)}, which is not installed: "
                         f"{_INSTALL_EXTRA}")
    import pyspark

    version = pyspark.__version__
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    if parts < PYSPARK_MIN:
        raise SparkError(f"PySpark {version} is too old; Weir needs PySpark "
                         f"{'.'.join(map(str, PYSPARK_MIN))} or newer (its Python data source "
                         f"admission control): {_INSTALL_EXTRA}")
    return version


def check_spark_environment() -> None:
    """Everything :func:`spark_session` needs before it starts a JVM."""
    check_pyspark()
    check_java()


def worker_python_path(extra: list[str] | tuple[str, ...] = ()) -> None:
    """Point PySpark's Python workers at this interpreter (they start ``python3`` from PATH
    otherwise, without Weir's packages: docs/SPARK.md, "Traps") and put ``extra`` directories on
    their module path (local mode: workers inherit the environment)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if extra:
        current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(p) for p in extra if str(p) not in current] + current)


def spark_session(conf: Mapping[str, Any] | None = None, *, app_name: str = "weir",
                  master: str | None = None, python_path: tuple[str, ...] = ()) -> Any:
    """A SparkSession for Weir (``getOrCreate``): checks Java and PySpark first, points the
    Python workers at this interpreter (never at their working directory: a checkout's
    ``weir/`` folder there would shadow the installed Weir), applies ``conf`` (``spark.*``
    keys), and registers Weir's Python data sources (``weirstate``, ``weirlog``)."""
    check_spark_environment()
    worker_python_path(python_path)
    import logging

    from pyspark.sql import SparkSession

    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines drown the job's

    builder = SparkSession.builder.appName(app_name)
    conf = dict(conf or {})
    builder = builder.master(master or str(conf.pop("spark.master", "local[*]")))
    conf.setdefault("spark.ui.showConsoleProgress", "false")
    # Python workers start as `python -m pyspark.daemon` (and the like), which puts their
    # working directory, the driver's, first on sys.path: run from a checkout of Weir, its
    # `weir/` facade folder shadowed the installed package (ModuleNotFoundError: weir.stores).
    # Workers import from their PYTHONPATH (the job config's directory) and site-packages.
    conf.setdefault(f"spark.executorEnv.{WORKER_SAFE_PATH}", "1")
    for key, value in conf.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    from weir.engine.spark.sources import register_data_sources

    register_data_sources(spark)
    return spark


WORKER_MODULES = ("pyarrow", "pyarrow.compute", "pyarrow.ipc", "zstandard",
                  "weir.engine.spark.operator", "weir.engine.spark.partition")
"""What every Weir state operator imports in a Python worker (:func:`warm_up` imports them)."""
_PROVIDER_MODULES = {"rocksdb": ("weir.stores.engines.rocksdb",),
                     "lmdb": ("weir.stores.engines.lmdb",)}
_TWS_MODULES = ("pandas", "weir.engine.spark.transform", "weir.engine.spark.processor")
_WORKER_REUSE = "spark.python.worker.reuse"
_WARM_SCHEMA = "pid long, warm boolean, import_ms double"


@dataclass(frozen=True)
class WarmUp:
    """What :func:`warm_up` did: the Python workers it started (or found running) and what the
    imports cost in them."""

    tasks: int
    workers: int
    already_warm: int
    import_ms: float
    seconds: float
    modules: tuple[str, ...]


def _warm_task(modules: Sequence[str], batches):
    """One warm-up task in a Python worker: import ``modules`` (a no-op in a warm worker)."""
    import importlib
    import os as _os

    import pyarrow as pa

    started = time.perf_counter()
    warm = all(m in sys.modules for m in modules)
    for module in modules:
        importlib.import_module(module)
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict(
        {"pid": [_os.getpid()], "warm": [warm],
         "import_ms": [round((time.perf_counter() - started) * 1000, 3)]})


def task_slots(spark: Any) -> int:
    """How many tasks the session runs at once: the cores of ``local[N]`` / ``local[*]`` /
    ``local-cluster[n, c, m]``, else ``spark.executor.instances`` x ``spark.executor.cores``
    when both are set, else the default parallelism (Spark's total executor cores unless
    ``spark.default.parallelism`` overrides it).

        >>> class Ctx:
        ...     master, defaultParallelism = "local[2,3]", 4
        ...     def getConf(self): return {}
        >>> class Session:
        ...     sparkContext = Ctx()
        >>> task_slots(Session())
        2
    """
    ctx = spark.sparkContext
    master = str(ctx.master).replace(" ", "")
    local = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master)
    if local:
        cores = local.group(1)
        return (os.cpu_count() or 1) if cores == "*" else int(cores or 1)
    cluster = re.fullmatch(r"local-cluster\[(\d+),(\d+),\d+\]", master)
    if cluster:
        return int(cluster.group(1)) * int(cluster.group(2))
    conf = ctx.getConf()
    instances, cores = conf.get("spark.executor.instances"), conf.get("spark.executor.cores")
    if instances and cores:
        return int(instances) * int(cores)
    return int(ctx.defaultParallelism)


def warm_up(spark: Any, *, tasks: int | None = None, transform_with_state: bool = True,
            modules: Sequence[str] = ()) -> WarmUp:
    """Start the session's Python workers and import Weir's worker modules in them, so that the
    first micro-batch of a query with Weir operators finds its workers warm (docs/SPARK.md,
    "Performance").

    Runs one small Spark job of ``tasks`` tasks (default: the session's task slots,
    :func:`task_slots`) in barrier mode, so all of them run at once, each in a Python worker of its own;
    each imports :data:`WORKER_MODULES`, the engine of the session's provider
    (``spark.weir.state.provider``), pandas and the ``transform_with_state`` modules when
    ``transform_with_state`` is true, and ``modules`` (your own function's imports). Spark keeps
    the workers (``spark.python.worker.reuse``, on by default) and hands them to the query's
    tasks; it stops workers idle for a minute, so call this right before ``start()``. Also
    useful after a session start in a notebook. Returns what it did.

    Raises :class:`SparkError` when ``spark.python.worker.reuse`` is false (every task would
    start a new worker, so nothing can be warmed), or ``tasks`` exceeds the slots.

    Example (a session from :func:`spark_session`)::

        warm_up(spark)                       # then: query = df.writeStream....start()
    """
    from weir.engine.spark.settings import ProviderSettings

    reuse = str(spark.conf.get(_WORKER_REUSE, "true")).strip().lower()
    if reuse != "true":
        raise SparkError(f"warm_up: {_WORKER_REUSE}={reuse}, so every task starts a new Python "
                         f"worker and there is nothing to warm; set {_WORKER_REUSE}=true "
                         f"(Spark's default) when the session starts")
    slots = task_slots(spark)
    count = slots if tasks is None else int(tasks)
    if count < 1 or count > slots:
        raise SparkError(f"warm_up: tasks={tasks} must be between 1 and the session's "
                         f"{slots} task slots (spark.master / spark.executor.*)")
    wanted = list(WORKER_MODULES)
    wanted += _PROVIDER_MODULES.get(ProviderSettings.from_spark(spark).provider, ())
    if transform_with_state:
        wanted += _TWS_MODULES
    wanted += [m for m in modules if m not in wanted]
    started = time.perf_counter()
    rows = (spark.range(count, numPartitions=count)
            .mapInArrow(partial(_warm_task, tuple(wanted)), _WARM_SCHEMA, barrier=True)
            .collect())
    return WarmUp(tasks=count, workers=len({r.pid for r in rows}),
                  already_warm=sum(1 for r in rows if r.warm),
                  import_ms=max((r.import_ms for r in rows), default=0.0),
                  seconds=round(time.perf_counter() - started, 3), modules=tuple(wanted))
