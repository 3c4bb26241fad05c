"""Errors of the machine say what they are and are never skipped.

A full disk (ENOSPC), an exceeded quota (EDQUOT), a read-only filesystem (EROFS) or a device
I/O error (EIO) raised while a task processes a message are not properties of the message:
the task error names the fault and its path and says what to fix, it never advises listing
the exception in ``task.ignored.exceptions``, and a listed class (``OSError``, ``*``) does not
skip it -- skipping would lose the message and fix nothing. A real ``weir run`` writes to
``/dev/full`` (a real ENOSPC) to show it end to end.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from weir.engine.errors import TaskError
from weir.engine.runloop.failures import IgnoredExceptions, machine_fault, task_error
from weir.recovery.checkpoint import MemoryCheckpointManager
from weir.stores.errors import StoreError

from tests.engine.runloop._helpers import A, ScriptedSource, eos, instance, msgs, offsets_of, run

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[3]

_USER_ADVICE = "list the exception class in task.ignored.exceptions"


class WritesTo:
    """A task that appends every message to ``path`` (and raises what the write raises)."""

    def __init__(self, path: str, raise_instead: BaseException | None = None):
        self.path = path
        self.raise_instead = raise_instead
        self.done: list[int] = []

    def process(self, envelope, collector, coordinator):
        if envelope.offset == 2:
            if self.raise_instead is not None:
                raise self.raise_instead
            with open(self.path, "a") as f:
                f.write(envelope.message)
                f.flush()
        self.done.append(envelope.offset)


@pytest.mark.parametrize("number,code,advice", [
    (errno.ENOSPC, "ENOSPC", "free space on the filesystem of /data/out.txt"),
    (errno.EDQUOT, "EDQUOT", "raise the disk quota"),
    (errno.EROFS, "EROFS", "make the filesystem of /data/out.txt writable again"),
    (errno.EIO, "EIO", "check the device holding /data/out.txt"),
])
@pytest.mark.parametrize("listed", ["", "OSError", "*"])
def test_a_machine_error_in_process_stops_the_task_naming_it_even_when_its_class_is_listed(
        number, code, advice, listed):
    checkpoints = MemoryCheckpointManager()
    task = WritesTo("/data/out.txt", OSError(number, os.strerror(number), "/data/out.txt"))
    config = {"task.ignored.exceptions": listed} if listed else {}
    with pytest.raises(TaskError) as info:
        run([instance(task, [A], config=config, checkpoints=checkpoints)],
            ScriptedSource(*msgs(A, 0, 1, 2, 3), eos(A, 4)), config)
    text = str(info.value)
    assert f"({code}) at /data/out.txt" in text.splitlines()[0]
    assert "test.clicks#0 offset 2" in text.splitlines()[0]
    assert advice in text
    assert "never skipped" in text
    assert _USER_ADVICE not in text
    assert info.value.machine_fault.code == code
    assert task.done == [0, 1]                 # message 2 was not skipped, 3 never started
    assert offsets_of(checkpoints, "Partition 0") is None   # a failed loop does not commit


def test_a_disk_error_reported_as_text_by_a_store_engine_is_a_machine_error():
    exc = StoreError("IO error: No space left on device: While appending to file: "
                     "/srv/state/counts/Partition_0/000012.log: No space left on device",
                     store="counts")
    fault = machine_fault(exc)
    assert (fault.code, fault.path) == ("ENOSPC", "/srv/state/counts/Partition_0/000012.log")
    wrapped = RuntimeError("flush failed")
    wrapped.__cause__ = exc
    assert machine_fault(wrapped) == fault
    err = task_error("Partition 0", wrapped, during="commit")
    assert "the machine failed: no space left on the device (ENOSPC) at /srv/state" in str(err)
    assert not IgnoredExceptions(["*"]).matches(wrapped)


def test_other_errors_keep_the_advice_to_fix_the_task_or_list_the_class():
    err = task_error("Partition 0", ValueError("bad input"), during="process", ssp=A, offset=7)
    assert _USER_ADVICE in str(err) and err.machine_fault is None
    assert IgnoredExceptions(["*"]).matches(ValueError("bad input"))
    assert IgnoredExceptions(["OSError"]).matches(FileNotFoundError(errno.ENOENT, "gone"))


class DiskFull:
    """The task of the process test: writes every message to /dev/full (ENOSPC when the
    buffer is written; Python's write errors carry no file name)."""

    def process(self, envelope, collector, coordinator):
        with open("/dev/full", "w") as f:
            f.write(envelope.message)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_weir_run_on_a_full_device_names_the_fault_and_never_advises_ignoring_it(tmp_path):
    from weir.engine.model import OutgoingMessageEnvelope, SystemStream
    from weir.engine.systems.api import StreamSpec
    from weir.engine.systems.registry import SystemRegistry
    from weir.stores.config import Config

    (tmp_path / "job.properties").write_text(
        "job.name=disk-full\n"
        "task.class=tests.engine.runloop.test_machine_faults:DiskFull\n"
        "task.inputs=filelog.words\n"
        "task.ignored.exceptions=OSError\n"
        "systems.filelog.root=log\n"
        "systems.filelog.samza.msg.serde=string\n"
        "systems.filelog.default.stream.samza.offset.default=oldest\n")
    registry = SystemRegistry(Config({"systems.filelog.root": str(tmp_path / "log")}))
    registry.admin("filelog").create_stream(StreamSpec("words", 1, bounded=True))
    producer = registry.producer("filelog")
    producer.register("t")
    producer.start()
    producer.send("t", OutgoingMessageEnvelope(SystemStream("filelog", "words"), b"hello",
                                               partition=0))
    producer.end_stream("words")
    producer.stop()
    done = subprocess.run([sys.executable, "-m", "weir", "run", "job.properties",
                           "--status", "off"], cwd=tmp_path, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "the machine failed: no space left on the device (ENOSPC)" in out
    assert "free space on the job's filesystems" in out    # a write error names no file
    assert _USER_ADVICE not in out
    assert "ignored OSError" not in out                    # listed, and still not skipped
