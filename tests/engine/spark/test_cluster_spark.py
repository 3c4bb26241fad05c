"""The Weir state operator on a real cluster: Spark's ``local-cluster[1,2,1024]`` master (a
standalone master and a worker in the driver's JVM; the executor is its own JVM process with its
own Python workers, launched by the worker), so an executor can die as it does on a cluster.

* An executor JVM killed with SIGKILL while a task is inside the operator's function: Spark
  loses the executor (and its Python workers and local replicas), the standalone master starts
  a new one, the task is retried elsewhere from the published version ``b - 1``; the state and
  the emitted counts equal a count of the input.

Spark's speculation cannot run here: ``TaskSetManager`` never launches a speculative copy on a
host where an attempt of the task already runs, and every executor of ``local-cluster`` runs on
one host. Racing attempts are tested at the partition level instead
(``test_partition.py::test_a_losing_attempt_adopts_...``), as docs/SPARK.md says.

Slow: the cluster and its executors take one to three minutes to start on a 2-core machine.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.engine.spark._spark import start_spark, stop_spark
from tests.engine.spark.test_operator_spark import FILES, Query, expected

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[3]
EXECUTOR_MAIN = b"org.apache.spark.executor.CoarseGrainedExecutorBackend"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("spark-cluster-scratch")
    python_path = os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    session = start_spark(scratch, app="weir-cluster-tests", master="local-cluster[1,2,1024]",
                          extra={"spark.task.maxFailures": "4",
                                 "spark.executor.memory": "768m",
                                 # executors are launched by the workers, not forked from us
                                 "spark.executorEnv.PYTHONPATH": python_path,
                                 "spark.executor.extraJavaOptions":
                                     f"-Djava.io.tmpdir={scratch}"})
    yield session
    stop_spark(session, scratch)


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return int(stat[stat.rindex(b")") + 2:].split()[1])


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(b")") + 2:].split()[0] != b"Z"


def _executor_of(pid: int) -> int:
    """The executor JVM above a Python worker (worker -> daemon -> executor)."""
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if EXECUTOR_MAIN in f.read():
                return pid
        pid = _parent(pid)
    raise AssertionError("this Python worker does not run under a Spark executor JVM")


def kill_executor_once(marker: str, fn):
    """``fn`` whose first call with rows anywhere SIGKILLs the executor JVM it runs under (as a
    lost node or an OOM-killed container would) and records the executor's pid in ``marker``."""

    def inside(state, table):
        if table.num_rows:
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return fn(state, table)
            executor = _executor_of(os.getpid())
            os.write(fd, str(executor).encode())
            os.close(fd)
            os.kill(executor, signal.SIGKILL)
        return fn(state, table)

    return inside


def test_an_executor_killed_inside_the_function_is_replaced_and_counts_stay_exact(
        cluster, tmp_path):
    from tests.engine.spark._spark import running_count

    q = Query(cluster, tmp_path)
    marker = tmp_path / "executor-killed"
    q.fn = kill_executor_once(str(marker), running_count)
    q.add(0, 1)
    assert q.run(timeout=900) == [0, 1]   # a new executor JVM starts mid-batch
    killed = int(marker.read_text())
    assert not _running(killed)                          # the executor JVM really died
    assert q.state() == expected(2)
    assert q.emitted_last() == expected(2)
    for batch in range(2):   # every batch emitted once, with the running totals of its keys
        keys = set(FILES[batch]["key"])
        assert q.emitted(batch) == {k: v for k, v in expected(batch + 1).items() if k in keys}
