"""An application's stages as Spark runs them, driven here without Spark
(tests/engine/spark/_app.py): the pageviews panes over many small micro-batches, replays,
shuffle order, task objects rebuilt from their versions, misrouted rows."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from tests._examples import load_example  # noqa: E402
from tests.engine.spark._app import LocalApp  # noqa: E402
from tests.engine.spark._feeds import feed_click_join, feed_three_stage  # noqa: E402
from weir.engine.spark import jobtask  # noqa: E402
from weir.engine.spark.errors import StatePartitioningError  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pageviews"


@pytest.fixture
def pageviews():
    return load_example("pageviews")


def _app(example, tmp_path: Path, views: int, *overrides: str, **kwargs) -> tuple:
    config = example.app_config(tmp_path, ["spark.weir.max.records.per.batch=150", *overrides])
    generated = example.generate(config, views)
    return LocalApp(config, tmp_path / "replicas", str(EXAMPLE), **kwargs), generated


def _panes(rows) -> tuple[dict, Counter]:
    minutes, sessions = {}, Counter()
    for system, stream, partition, key, value, ts in rows:
        pane = json.loads(value)
        if stream == "views-per-minute":
            assert (pane["key"], pane["start"]) not in minutes   # each minute fires once
            minutes[(pane["key"], pane["start"])] = pane["value"]
        else:
            assert stream == "sessions"
            sessions[(pane["key"], pane["start"], pane["end"], pane["value"])] += 1
    return minutes, sessions


def test_pageviews_over_many_small_batches_gives_the_direct_computation(pageviews, tmp_path):
    app, views = _app(pageviews, tmp_path, 900)
    assert app.run() > 5
    assert _panes(app.rows()) == pageviews.truth(views)
    assert all(r[2] == int(r[2]) for r in app.rows())


def test_panes_do_not_depend_on_the_order_spark_fetches_upstream_blocks(pageviews, tmp_path):
    app, views = _app(pageviews, tmp_path, 600, shuffle_order=lambda rows: rows[::-1])
    app.run()
    assert _panes(app.rows()) == pageviews.truth(views)


def test_a_replayed_batch_emits_what_every_stage_recorded(pageviews, tmp_path):
    app, views = _app(pageviews, tmp_path, 600)
    app.run()
    fired = [b for b, rows in app.outputs.items() if rows]
    assert fired
    for batch in fired[:3]:
        assert Counter(app.replay(batch)) == Counter(app.outputs[batch])


def test_task_objects_rebuilt_from_their_versions_give_the_same_panes(pageviews, tmp_path):
    """A new worker (no task object kept) restores each task's control bookkeeping --
    watermarks per upstream task, who ended -- from the previous version."""
    app, views = _app(pageviews, tmp_path, 600)
    while app.step():
        for slot in jobtask._SLOTS.values():
            slot.close()
        jobtask._SLOTS.clear()
    assert _panes(app.rows()) == pageviews.truth(views)


def test_a_row_the_shuffle_sent_to_another_partition_is_refused(pageviews, tmp_path):
    app, _ = _app(pageviews, tmp_path, 200)
    wrong = app.shuffle

    def misroute(rows, partitions):
        parts = wrong(rows, partitions)
        return parts[1:] + parts[:1]

    app.shuffle = misroute
    with pytest.raises(StatePartitioningError, match="did not route by Weir partition"):
        app.run()


@pytest.mark.parametrize("app,feed", [("ThreeStage", feed_three_stage),
                                      ("ClickJoin", feed_click_join)])
def test_stages_in_small_batches_write_what_the_embedded_runner_writes(app, feed, tmp_path):
    """A chain of two shuffles, and a stream-stream join of two shuffled streams fed by two
    source stages run together."""
    from tests.engine.app._pipeline import Pipeline

    embedded = Pipeline(tmp_path / "embedded", app)
    feed(embedded)
    embedded.run()
    want = Counter((repr(k), repr(v)) for k, v, _ in embedded.outputs())
    on_spark = Pipeline(tmp_path / "spark", app, spark__weir__max__records__per__batch=40)
    feed(on_spark)
    local = LocalApp(on_spark.config, tmp_path / "replicas", "")
    assert local.run() > 3
    got = Counter((repr(None if k is None else json.loads(k)), repr(json.loads(v)))
                  for *_, k, v, _ in local.rows())
    assert want and got == want


def test_a_stage_task_does_not_drain_itself_when_a_drain_request_appears(pageviews, tmp_path):
    """A drain on Spark stops the source's admission and the query between batches; the
    stages' tasks must not drain themselves on the request file they can see: a drained task
    would count as finished in every later run, never reading on."""
    from weir.engine.control.drain import drain_path_of, write_drain_request

    app, views = _app(pageviews, tmp_path, 900, "task.drain.poll.interval.ms=1")
    path = drain_path_of(app.app.config)
    assert app.step() and app.step()
    assert app.step(planned=lambda: write_drain_request(path))   # the batch in flight
    assert not app.step()                                  # the source admits nothing more
    path.unlink()                                          # the drain completed; a new run
    app.run()
    assert _panes(app.rows()) == pageviews.truth(views)
