"""Bad control messages and bad plans stop the job with typed errors that name the stream,
partition and offset (or the operator and the fix)."""

from __future__ import annotations

import pytest

from tests.engine.app._apps import make_events
from tests.engine.app._pipeline import Pipeline
from weir.engine.container.runner import ExitCode, run_job
from weir.engine.container.status import StatusMode
from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.recovery.storage import ProgressMode

pytestmark = pytest.mark.timeout(120)
BY_USER = "t-1-partition_by-by-user"




def test_an_unknown_control_version_stops_the_job_naming_stream_partition_and_offset(tmp_path):
    raw = b'\x01{"timestamp":5,"taskName":"Partition 0","taskCount":2,"version":2}'
    p = Pipeline(tmp_path, "WindowedCounts", job__intermediate__stream__partitions=2)
    p.create("events", 2)
    p.produce("events", make_events(31, 100), lambda i, e: i % 2, end=False)
    # Stage 0 has not run: the bad message is the first record of partition 1.
    p.job_config(stage=1)   # plans and creates the intermediate stream
    producer = p.registry.producer("filelog")
    producer.register("x")
    producer.start()
    producer.send("x", OutgoingMessageEnvelope(SystemStream("filelog", BY_USER), raw, key=None,
                                               partition=1))
    producer.stop()
    result = run_job(p.job_config(stage=1), status=StatusMode.OFF, progress=ProgressMode.QUIET)
    assert result.exit_code is ExitCode.FAILED
    (failure,) = result.failures
    assert failure.error_type == "UnknownControlVersionError"
    assert f"filelog.{BY_USER} partition 1 offset 0" in failure.message


def test_a_task_count_that_disagrees_with_the_plan_stops_the_job(tmp_path):
    raw = b'\x02{"taskName":"Partition 7","taskCount":8,"version":1}'
    p = Pipeline(tmp_path, "WindowedCounts", job__intermediate__stream__partitions=2)
    p.create("events", 2)
    p.produce("events", make_events(32, 10), lambda i, e: i % 2, end=False)
    p.job_config(stage=1)
    producer = p.registry.producer("filelog")
    producer.register("x")
    producer.start()
    for _ in range(3):   # some user records first: the error names the control record's offset
        producer.send("x", OutgoingMessageEnvelope(SystemStream("filelog", BY_USER),
                                                   b"\x00\x81\xa1a\x01", key=b"\xa1k", partition=0,
                                                   timestamp=5))
    producer.send("x", OutgoingMessageEnvelope(SystemStream("filelog", BY_USER), raw, key=None,
                                               partition=0))
    producer.stop()
    result = run_job(p.job_config(stage=1), status=StatusMode.OFF, progress=ProgressMode.QUIET)
    (failure,) = result.failures
    assert failure.error_type == "BadTaskCountError"
    assert f"filelog.{BY_USER} partition 0 offset 3" in failure.message
    assert "taskCount 8 disagrees with the 2 upstream tasks expected" in failure.message
