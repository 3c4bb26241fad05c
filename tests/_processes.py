"""What the end-to-end and reliability tests do to a real job: produce its input, start
``weir run`` (or any ``weir`` command) as a real process, read how far its checkpoints got,
SIGKILL it, and read what it wrote. One copy for every test module and helper job module."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.recovery.checkpoint import FileCheckpointManager

__all__ = ["ROOT", "produce", "weir_env", "start_weir", "run_weir", "committed_offsets",
           "committed_messages", "kill", "task_stores", "stream_envelopes", "read_partitions"]

ROOT = Path(__file__).resolve().parents[1]
"""The repository root (on the job processes' module path, so ``tests.*`` task classes load)."""


def produce(registry, stream: str, items: Iterable, *, partitions: int, end: bool = False,
            first: int = 0, serialize: bool = False, system: str = "filelog") -> None:
    """Send ``items`` to ``system.stream`` round-robin over ``partitions`` (the ``i``-th item,
    counting from ``first``, to partition ``i % partitions``), encoded (a ``str``) or through
    the stream's serde (``serialize``); with ``end``, then end the stream."""
    target = SystemStream(system, stream)
    serdes = registry.serdes_for(target) if serialize else None
    producer = registry.producer(system)
    producer.register("test")
    producer.start()
    try:
        for i, item in enumerate(items, start=first):
            if serdes is not None:
                value = serdes.serialize_message(item)
            else:
                value = item.encode() if isinstance(item, str) else item
            producer.send("test", OutgoingMessageEnvelope(target, value, partition=i % partitions))
        producer.flush("test")
        if end:
            producer.end_stream(stream)
    finally:
        producer.stop()


def weir_env(*paths: Path | str) -> dict[str, str]:
    """The environment of a ``weir`` process: the repository root (and ``paths``) importable."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *map(str, paths)]))


def start_weir(cwd: Path, config: str = "job.properties", *args: str,
               paths: Sequence[Path | str] = (), **popen) -> subprocess.Popen:
    """Start ``weir run <config> --status off <args>`` in ``cwd``; stdout and stderr together,
    as text."""
    return subprocess.Popen([sys.executable, "-m", "weir", "run", config, "--status", "off",
                             *args], cwd=cwd, env=weir_env(*paths), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **popen)


def run_weir(cwd: Path, *args: str, timeout: float = 90, stdin: str | None = None,
             paths: Sequence[Path | str] = (), merge: bool = True) -> subprocess.CompletedProcess:
    """Run ``weir <args>`` in ``cwd`` to its end (stderr into stdout unless not ``merge``)."""
    return subprocess.run([sys.executable, "-m", "weir", *args], cwd=cwd, env=weir_env(*paths),
                          input=stdin, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT if merge else subprocess.PIPE, text=True,
                          timeout=timeout)


def _last_checkpoints(checkpoint_dir: Path, partitions: int) -> dict[int, object]:
    """The last checkpoint of each task ``Partition p`` (None before any; a read that races a
    checkpoint being written counts as none yet)."""
    manager = FileCheckpointManager(checkpoint_dir)
    out = {}
    for p in range(partitions):
        try:
            out[p] = manager.read_last(f"Partition {p}")
        except Exception:  # noqa: BLE001 - a read racing the first write: ask again later
            out[p] = None
    return out


def committed_offsets(checkpoint_dir: Path, partitions: int, stream: str,
                      system: str = "filelog") -> dict[int, int]:
    """The checkpointed offset of partition ``p`` of ``system.stream`` per task
    ``Partition p`` (-1 before any)."""
    return {p: -1 if cp is None else cp.input_offsets.get((system, stream, p), -1)
            for p, cp in _last_checkpoints(checkpoint_dir, partitions).items()}


def committed_messages(checkpoint_dir: Path, partitions: int, streams: Iterable[str],
                       system: str = "filelog") -> int:
    """Messages of ``streams`` (every partition) the checkpoints of tasks ``Partition 0`` to
    ``Partition partitions-1`` cover."""
    wanted = set(streams)
    return sum(offset + 1 for cp in _last_checkpoints(checkpoint_dir, partitions).values()
               if cp is not None
               for (s, stream, _), offset in cp.input_offsets.items()
               if s == system and stream in wanted)


def kill(proc: subprocess.Popen, *, group: bool = False) -> str:
    """SIGKILL ``proc`` (its whole process group with ``group``), check that the kill, not an
    end of the job, stopped it, and return what it printed."""
    if group:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.send_signal(signal.SIGKILL)
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, f"the job ended before the kill:\n{output}"
    return output


def task_stores(config, registry, cwd: Path, partitions: int) -> dict[int, dict[str, dict]]:
    """Every store of every task ``Partition p`` as a dict, opened through the storage layer at
    the task's last checkpoint (what a restart would see)."""
    from weir.engine.config.job import JobConfig
    from weir.engine.container.container import store_specs
    from weir.engine.container.task_storage import TaskStorage
    from weir.recovery.storage import ProgressMode

    job = JobConfig.from_config(config, cwd=cwd)
    checkpoints = FileCheckpointManager(job.checkpoint_dir)
    producer = registry.producer("filelog")
    producer.start()
    out: dict[int, dict[str, dict]] = {}
    try:
        for p in range(partitions):
            task = f"Partition {p}"
            storage = TaskStorage(task, store_specs(config, job), job, p, {"filelog": producer},
                                  registry, config, ProgressMode.QUIET)
            try:
                out[p] = {}
                for name, store in storage.open(checkpoints.read_last(task)).items():
                    with store.all() as it:
                        out[p][name] = dict(it)
            finally:
                storage.close()
    finally:
        producer.stop()
    return out


def stream_envelopes(registry, system: str, stream: str) -> dict[int, list]:
    """Every envelope of ``system.stream`` per partition as stored (bytes), read committed (the
    consumer's default), end-of-stream markers left out. Reads each partition up to the end its
    metadata gives (the reader's position, not the last record's offset: under exactly-once the
    last frames are commit markers, which take offsets but are never delivered)."""
    admin = registry.admin(system)
    ssps = [SystemStreamPartition(system, stream, p)
            for p in range(admin.partition_count(stream))]
    meta = admin.metadata(ssps)
    consumer = registry.consumer(system)
    for ssp in ssps:
        consumer.register(ssp, 0)
    consumer.start()
    out: dict[int, list] = {ssp.partition: [] for ssp in ssps}
    try:
        for ssp in ssps:
            end = meta[ssp].upcoming
            while consumer.position(ssp) < end:
                envelopes = consumer.poll([ssp], 1.0).get(ssp, [])
                if any(e.is_end_of_stream for e in envelopes):
                    end = -1
                out[ssp.partition].extend(e for e in envelopes if not e.is_end_of_stream)
    finally:
        consumer.stop()
    return out


def read_partitions(registry, stream: str, system: str = "filelog") -> dict[int, list]:
    """:func:`stream_envelopes` deserialized with the stream's serdes."""
    serdes = registry.serdes_for(SystemStream(system, stream))
    return {p: [serdes.deserialize(e) for e in envelopes]
            for p, envelopes in stream_envelopes(registry, system, stream).items()}
