"""A job's tasks inside micro-batches, without Spark: the weirlog reader plans each batch and
the task function runs here (tests/engine/spark/_job.py). The currency example gives the same
amounts and totals as a direct computation; batches replayed, replicas lost, tasks voting to
stop in the middle of a batch, task objects kept across batches."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import orjson
import pytest

from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.engine.spark.errors import InputPositionError
from weir.engine.spark.replica import release_replicas
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config

from tests.engine.spark import jobtasks
from tests.engine.spark._job import LocalJob

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "currency_join"


@pytest.fixture
def currency(tmp_path):
    sys.path.insert(0, str(EXAMPLE))
    try:
        from generate import generate
        from run_example import check, job_config

        def make(*overrides, transactions=300, replay=150):
            config = job_config(tmp_path, overrides)
            truth = generate(config, transactions=transactions, replay=replay)
            return config, truth, check
        yield make
    finally:
        sys.path.remove(str(EXAMPLE))
        release_replicas()


def outputs(rows) -> tuple[list[tuple[str, dict]], dict[str, dict]]:
    amounts = [(k.decode(), orjson.loads(v)) for s, st, p, k, v, ts in rows if st == "amounts"]
    totals = {}
    for s, st, p, k, v, ts in rows:
        if st == "currency-totals":
            m = orjson.loads(v)
            totals[k.decode()] = {"total": m["total"], "count": m["count"]}
    return amounts, totals


def test_the_currency_job_matches_a_direct_computation_bootstrap_first(currency, tmp_path):
    config, truth, check = currency()
    job = LocalJob(config, tmp_path / "local", str(EXAMPLE))
    assert job.run() == 2
    assert job.outputs[0] == []                          # batch 0: the bootstrap stream only
    # the 20 codes, each task's 3 ranges and the 4 ended code partitions' end-of-stream
    assert sum(m["rows_in"] for m in job.metrics[0]) == 20 + 4 * 3 + 4
    amounts, totals = outputs(job.rows())
    assert check(truth, amounts, totals) == []


def test_small_batches_keep_bootstrap_and_priorities_and_give_the_same_result(currency, tmp_path):
    config, truth, check = currency("spark.weir.max.records.per.batch=32",
                                    "task.window.ms=1")
    job = LocalJob(config, tmp_path / "local", str(EXAMPLE), provider="lmdb")
    batches = job.run()
    assert batches > 10
    amounts, totals = outputs(job.rows())
    assert check(truth, amounts, totals) == []
    windowed = [b for b in job.outputs if any(r[1] == "currency-totals" for r in job.outputs[b])]
    assert len(windowed) > 2                              # windows ran across batches


def test_a_replayed_batch_emits_what_its_version_recorded(currency, tmp_path):
    config, truth, check = currency("spark.weir.max.records.per.batch=100")
    job = LocalJob(config, tmp_path / "local", str(EXAMPLE))
    for _ in range(4):
        job.step()
    assert sorted(job.replay(2)) == sorted(job.outputs[2])
    release_replicas()                                    # every worker gone ...
    shutil.rmtree(tmp_path / "local")                    # ... with its disk
    assert sorted(job.replay(3)) == sorted(job.outputs[3])
    job.run()
    amounts, totals = outputs(job.rows())
    assert check(truth, amounts, totals) == []


def words_job(tmp_path, task_class: str, words: dict[int, list[str]], *extra: str) -> Config:
    config = Config({
        "job.name": "words", "task.class": f"tests.engine.spark.jobtasks:{task_class}",
        "task.inputs": "filelog.words", "job.data.dir": str(tmp_path / "data"),
        "systems.filelog.factory": "filelog", "systems.filelog.root": str(tmp_path / "log"),
        "systems.filelog.samza.key.serde": "string", "systems.filelog.samza.msg.serde": "json",
        "systems.filelog.default.stream.samza.offset.default": "oldest",
        "stores.counts.factory": "lmdb", "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "int64",
        **dict(item.split("=", 1) for item in extra)})
    registry = SystemRegistry(config)
    admin = registry.admin("filelog")
    admin.create_stream(StreamSpec("words", len(words), bounded=True))
    admin.create_stream(StreamSpec("counts-out", len(words)))
    producer = registry.producer("filelog")
    producer.register("t")
    producer.start()
    ss = SystemStream("filelog", "words")
    serdes = registry.serdes_for(ss)
    for partition, items in words.items():
        for w in items:
            producer.send("t", OutgoingMessageEnvelope(ss, serdes.serialize_message(w),
                                                       key=serdes.serialize_key(w),
                                                       partition=partition))
    producer.flush("t")
    producer.end_stream("words")
    producer.stop()
    return config


def final_counts(rows) -> dict[tuple[int, str], int]:
    return {(p, k.decode()): int.from_bytes(v, "big") ^ (1 << 63) if len(v) == 8 else orjson.loads(v)
            for s, st, p, k, v, ts in rows if st == "counts-out"}


def _version_meta(job, task: int, batch: int) -> dict:
    from weir.engine.spark.durable import OperatorCheckpoint
    from weir.engine.spark.statefile import VersionKind

    files = OperatorCheckpoint(job.plan.checkpoint, job.plan.operator).partition(task)
    return files.read(batch, VersionKind.CHANGELOG, sections=[]).meta


def test_a_vote_to_stop_takes_effect_at_the_end_of_the_batch(tmp_path):
    words = {0: ["a", "b", "vote", "c", "a", "d"], 1: ["x", "y"]}
    config = words_job(tmp_path, "CountAndVote", words)
    job = LocalJob(config, tmp_path / "local", "")
    try:
        assert job.step()
        meta = _version_meta(job, 0, 0)
        assert meta["next"]["filelog/words/0"] == 7      # all of it after the vote, and EOS
        assert meta["complete"] is True
        assert final_counts(job.rows()) == {(0, "a"): 2, (0, "b"): 1, (0, "c"): 1, (0, "d"): 1,
                                            (1, "x"): 1, (1, "y"): 1}
    finally:
        release_replicas()


def test_input_left_by_a_container_wide_stop_is_processed_by_the_next_batch(tmp_path):
    words = {0: ["a", "b", "stop-all", "c", "a", "d"], 1: ["x", "y"]}
    config = words_job(tmp_path, "CountAndVote", words)
    job = LocalJob(config, tmp_path / "local", "")
    try:
        assert job.step()
        meta = _version_meta(job, 0, 0)
        assert meta["stop_all"] is True and meta["next"]["filelog/words/0"] == 3
        assert job.step()                                # no new input: a batch for the rest
        assert job.offsets["_carry"] == 1
        assert not job.step()
        assert final_counts(job.rows()) == {(0, "a"): 2, (0, "b"): 1, (0, "c"): 1, (0, "d"): 1,
                                            (1, "x"): 1, (1, "y"): 1}
    finally:
        release_replicas()


def test_state_and_input_that_disagree_are_refused(tmp_path):
    config = words_job(tmp_path, "CountAndVote", {0: ["a", "b", "c"]},
                       "spark.weir.max.records.per.batch=2")
    job = LocalJob(config, tmp_path / "local", "")
    try:
        job.step()
        job.step()
        part = job.ranges[1][0]                          # batch 1 again, but starting at 0
        part.ranges = {k: (0, hi) for k, (lo, hi) in part.ranges.items()}
        with pytest.raises(InputPositionError, match="processed filelog/words/0 up to offset"):
            job.run_task(2, part)
    finally:
        release_replicas()


def test_a_task_object_lives_across_batches_while_its_replica_continues(tmp_path):
    jobtasks.INITS.clear()
    config = words_job(tmp_path, "InitCounter", {0: list("abcdefgh")},
                       "spark.weir.max.records.per.batch=2")
    job = LocalJob(config, tmp_path / "local", "")
    try:
        for _ in range(3):
            job.step()
        assert jobtasks.INITS == ["Partition 0"]
        release_replicas()                                # the worker went away
        job.run()
        assert jobtasks.INITS == ["Partition 0", "Partition 0"]
        assert final_counts(job.rows()) == {(0, w): 1 for w in "abcdefgh"}
    finally:
        release_replicas()


def _batch_source(envelopes):
    from weir.engine.chooser import chooser_from_config
    from weir.engine.consumers.consumers import SystemConsumers
    from weir.engine.spark.jobtask import _BatchAdmin, _BatchConsumer, _BatchSource

    config = Config({"task.inputs": "m.s", "task.poll.interval.ms": "600000"})
    batch = _BatchConsumer({ssp: list(envs) for ssp, envs in envelopes.items()})
    consumers = SystemConsumers(chooser_from_config(config), {"m": batch},
                                {"m": _BatchAdmin(envelopes, {})}, None, config)
    for ssp in envelopes:
        consumers.register(ssp, 0)
    consumers.start()
    return _BatchSource(consumers, batch)


def test_the_micro_batch_source_hands_out_runs_of_what_choose_would_return_in_order():
    """The run loop's inline path takes a source's runs (``choose_run``) instead of one
    ``choose`` call per envelope: the micro-batch source serves them from the consumers' fast
    lane, the same envelopes in the same order."""
    from weir.engine.model import IncomingMessageEnvelope, SystemStreamPartition

    ssps = [SystemStreamPartition("m", "s", p) for p in range(2)]
    envelopes = {ssp: [IncomingMessageEnvelope(ssp, o, None, b"%d" % o) for o in range(20)]
                 for ssp in ssps}
    one_by_one, source = [], _batch_source(envelopes)
    while (env := source.choose(0.0)) is not None:
        one_by_one.append((env.ssp.partition, env.offset))
    assert len(one_by_one) == 40 and source.exhausted()

    in_runs, runs, source = [], [], _batch_source(envelopes)
    while True:
        run = list(source.choose_run(64))
        if not run:
            env = source.choose(0.0)
            if env is None:
                break
            run = [env]
        runs.append(len(run))
        in_runs.extend((env.ssp.partition, env.offset) for env in run)
    assert in_runs == one_by_one and source.exhausted()
    assert max(runs) > 1
