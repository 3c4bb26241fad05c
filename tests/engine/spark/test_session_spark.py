"""``warm_up``: the Python workers started and Weir's modules imported before a query, in a real
Spark session (local mode), and the session as usable as before.

No timing is asserted: that the workers are warm is read from the workers themselves (a second
warm-up finds Weir's modules already imported in every worker it gets, the same processes).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from weir.engine.spark.errors import SparkError
from weir.engine.spark.session import WORKER_MODULES, task_slots, warm_up

from tests.engine.spark._spark import (await_query, running_count, start_spark, stop_spark,
                                       write_parquet)

pytestmark = pytest.mark.spark

RNG = np.random.default_rng(26)
FILES = [pd.DataFrame({"key": [f"k{i:02d}" for i in RNG.integers(0, 30, 200)],
                       "v": RNG.integers(0, 9, 200)}) for _ in range(2)]


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("spark-scratch")
    session = start_spark(scratch, app="weir-warm-up-tests")
    yield session
    stop_spark(session, scratch)


def _counts(spark, data, checkpoint) -> pd.DataFrame:
    """A running count per key through a StateOperator; the final count of every key."""
    from weir.spark import StateOperator

    src = spark.readStream.schema("key string, v long").option("maxFilesPerTrigger", 1) \
        .parquet(str(data))
    op = StateOperator("counts", checkpoint_location=str(checkpoint), key="key",
                       stores={"counts": {"key.serde": "string", "msg.serde": "int64"}})
    out = checkpoint.parent / f"{checkpoint.name}-out"
    query = (op.apply(src, running_count, "key string, count long").writeStream
             .format("parquet").option("path", str(out))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    await_query(query)
    rows = pd.read_parquet(out)
    return rows.groupby("key")["count"].max().sort_index()


def test_a_query_after_warm_up_gives_the_same_rows_as_without_it(spark, tmp_path):
    data = tmp_path / "in"
    for i, frame in enumerate(FILES):
        write_parquet(data, i, frame)

    done = warm_up(spark)
    warm = _counts(spark, data, tmp_path / "warm")

    expected = pd.concat(FILES).groupby("key").size().sort_index()
    assert done.tasks == task_slots(spark) == 2          # local[2,2]
    assert set(WORKER_MODULES) <= set(done.modules)
    assert list(warm.items()) == list(expected.items())


def test_a_second_warm_up_finds_every_worker_warm(spark):
    first = warm_up(spark, modules=("json",))
    second = warm_up(spark, modules=("json",))

    assert first.workers == second.workers == first.tasks
    assert second.already_warm == second.tasks


def test_warm_up_refuses_more_tasks_than_the_session_has_slots(spark):
    with pytest.raises(SparkError, match="task slots"):
        warm_up(spark, tasks=task_slots(spark) + 1)
