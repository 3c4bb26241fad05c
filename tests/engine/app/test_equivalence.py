"""Event-time windowed counts equal the direct batch computation whatever the partition counts,
the chooser, the thread mode and the split into jobs.

Each example runs a real application over a real file log in this process. CI runs a few
examples; ``WEIR_LONG_TESTS=1`` runs many more (the randomized variant)."""

from __future__ import annotations

import os
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.app._apps import batch_three_stage, batch_window_counts, make_events
from tests.engine.app._pipeline import Pipeline
from weir.engine.container.runner import run_job
from weir.engine.container.status import StatusMode
from weir.recovery.storage import ProgressMode

pytestmark = pytest.mark.timeout(300)
LONG = bool(os.environ.get("WEIR_LONG_TESTS"))

MODES = {
    "inline": {},
    "pool": {"job.container.thread.pool.size": 2},
    "pool-4-threads": {"job.container.thread.pool.size": 4},
    "time-chooser": {"task.chooser.tiebreak": "time"},
    "batching": {"task.chooser.batch.size": 7},
}


def latest_panes(outputs):
    return {(pane["key"], pane["start"]): pane["value"] for _, pane, _ in outputs}


def run_split(p: Pipeline, stages: int, *, concurrently: bool) -> None:
    """Run every stage as its own job: one after the other, or all at once (threads)."""
    configs = [p.job_config(stage) for stage in range(stages)]
    if not concurrently:
        for cfg in configs:
            result = run_job(cfg, status=StatusMode.OFF, progress=ProgressMode.QUIET)
            assert result.exit_code == 0, "\n".join(result.summary_lines())
        return
    results = [None] * stages

    def run(i):
        results[i] = run_job(configs[i], status=StatusMode.OFF, progress=ProgressMode.QUIET)

    threads = [threading.Thread(target=run, args=(i,)) for i in reversed(range(stages))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for r in results:
        assert r is not None and r.exit_code == 0, "\n".join(r.summary_lines()) if r else "hung"


@pytest.mark.parametrize("mode", list(MODES))
def test_windowed_counts_equal_the_batch_count_in_every_thread_mode_and_chooser(tmp_path, mode):
    events = make_events(11, 700, disorder_ms=120, users=11)
    p = Pipeline(tmp_path, "WindowedCounts", task__watermark__max__out__of__orderness__ms=120,
                 job__intermediate__stream__partitions=3)
    p.with_config(**{k.replace(".", "__"): v for k, v in MODES[mode].items()})
    p.create("events", 2)
    p.produce("events", events, lambda i, e: i % 2)
    p.run()
    assert latest_panes(p.outputs()) == batch_window_counts(events)


@pytest.mark.parametrize("concurrently", [False, True], ids=["one-after-another", "at-once"])
def test_the_same_application_split_into_one_job_per_stage_reaches_the_same_result(tmp_path,
                                                                                  concurrently):
    events = make_events(12, 500, users=6)
    p = Pipeline(tmp_path, "ThreeStage")
    p.create("events", 3)
    p.produce("events", events, lambda i, e: i % 3)
    run_split(p, 3, concurrently=concurrently)
    assert {pane["start"]: pane["value"] for _, pane, _ in p.outputs()} == batch_three_stage(events)


@settings(max_examples=60 if LONG else 4, deadline=None, derandomize=not LONG,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 400), users=st.integers(1, 12),
       inputs=st.integers(1, 3), intermediate=st.integers(1, 4), disorder=st.integers(0, 200),
       window=st.sampled_from([100, 250, 1000]), mode=st.sampled_from(sorted(MODES)),
       split=st.sampled_from(["one-job", "stages"]))
def test_windowed_counts_equal_the_batch_count_for_any_partitioning(
        tmp_path_factory, seed, n, users, inputs, intermediate, disorder, window, mode, split):
    events = make_events(seed, n, users=users, disorder_ms=disorder)
    p = Pipeline(tmp_path_factory.mktemp("eq"), "WindowedCounts",
                 task__watermark__max__out__of__orderness__ms=disorder,
                 job__intermediate__stream__partitions=intermediate, test__window__ms=window)
    p.with_config(**{k.replace(".", "__"): v for k, v in MODES[mode].items()})
    p.create("events", inputs)
    p.produce("events", events, lambda i, e: (i * 7 + seed) % inputs)
    if split == "one-job":
        p.run()
    else:
        run_split(p, 2, concurrently=True)
    assert latest_panes(p.outputs()) == batch_window_counts(events, window)
