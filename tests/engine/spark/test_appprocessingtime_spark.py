"""A processing-time window on Spark: hello-samza's TumblingWindowExample (Samza's
``keyed_tumbling_window``, a count per user on the task's clock) run by ``weir run --runner
spark`` in a real child process, its driver SIGKILLed between the window stage's publish of a
batch and Spark's commit of it, then run again to the end.

The panes cannot equal the embedded runner's: which views share a pane depends on the wall
clock when each is processed (the embedded run loop's timer fires every ``task.window.ms``;
on Spark the timer is checked once per micro-batch, on the Python workers' clocks), and no
clock can be injected into Spark's workers. What must hold whatever the timing, and is
asserted here, as for the embedded runner on the same input: every view is counted exactly
once across the panes (the counts per user equal the input's, so no pane was lost or emitted
twice by the replayed batch), and every pane is on time.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from tests.engine.app._pipeline import Pipeline
from tests.engine.spark import _weirrun

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(2400)]

INPUT, OUTPUT = "pageview-tumbling-input", "pageview-tumbling-output"
WINDOW_STAGE = "t-1-stage-1"


def _views(n: int, seed: int = 24) -> list[dict]:
    rng = random.Random(seed)
    return [{"userId": f"user{rng.randrange(40)}", "pageId": f"site.com/{rng.randrange(9)}",
             "i": i, "ts": 1_000_000 + i} for i in range(n)]


def _feed(p: Pipeline, views: list[dict]) -> None:
    p.create(INPUT, 2)
    p.produce(INPUT, views, lambda i, v: i % 2, key=lambda v: v["userId"],
              timestamp=lambda v: v["ts"])


def _per_user(p: Pipeline) -> Counter:
    per_user: Counter = Counter()
    for key, value, _ in p.outputs(OUTPUT, string_keys=True):
        assert key == value["userId"] and value["timing"] == "on_time"
        per_user[key] += value["count"]
    return per_user


def test_a_processing_time_window_on_spark_counts_every_view_once_across_a_replayed_batch(
        tmp_path):
    views = _views(2_000)
    want = Counter(v["userId"] for v in views)
    embedded = Pipeline(tmp_path / "embedded", "TumblingWindowExample", test__window__ms=200,
                        job__container__count=1)
    _feed(embedded, views)
    embedded.run()
    assert _per_user(embedded) == want

    on_spark = Pipeline(tmp_path / "spark", "TumblingWindowExample", test__window__ms=200,
                        spark__master="local[2,3]", spark__sql__shuffle__partitions="2",
                        spark__weir__state__local__dir=str(tmp_path / "replicas"),
                        spark__local__dir=str(tmp_path / "scratch"),
                        spark__weir__max__records__per__batch="500")
    _feed(on_spark, views)
    props = tmp_path / "app.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in sorted(on_spark.config.items())))
    marker = tmp_path / "held-after-publish"
    driver = _weirrun.start(props, [], tmp_path / "driver.log",
                            f"after-publish:{WINDOW_STAGE}:1:{marker}")
    _weirrun.kill_at(driver, marker)

    done = _weirrun.run_to_end(props, [])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert "ended (end-of-stream)" in done.stdout
    assert _per_user(on_spark) == want
