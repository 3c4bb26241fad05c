"""A shared writer process of the sharing stress tests (run as a script, killed with SIGKILL).

Appends records ``b"<name>:<incarnation>:<seq>:"`` + padding (now and then one bigger than the
segment and the buffer) to partition 0 of stream ``s`` through a SHARED ``PartitionWriter``,
flushes after a random number of them and, after each flush returns, appends the highest
acknowledged ``seq`` to ``<acks>`` (one line, one ``write``). With a crash point it kills
itself with SIGKILL at that point of the writer's work with probability ``p`` per passage:

* ``partial`` -- half of a write-out's bytes written, then killed (a torn write)
* ``written`` -- a write-out written whole, killed before the flush returns
* ``index`` -- a sealed segment's index written, next segment not yet created
* ``created`` -- the next segment created, maintenance not yet run
* ``maintain`` -- in the middle of the maintenance run at a roll (after compressing/
  compacting, before returning)
* ``hint`` -- right after writing a tail hint

Usage: python _shared_stress_writer.py <repo> <root> <name> <incarnation> <seed> <acks>
       <crash point|none> <p> <config json>
"""

import json
import os
import random
import signal
import sys

sys.path.insert(0, sys.argv[1])

from weir.engine.systems.filelog import PartitionWriter, WriterSharing  # noqa: E402
from weir.engine.systems.filelog import writer as writer_mod  # noqa: E402
from tests.engine.systems.filelog.conftest import Log  # noqa: E402

(root, name, incarnation, seed, acks_path, point, p, config) = (
    sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7],
    float(sys.argv[8]), json.loads(sys.argv[9]))
rng = random.Random(seed)
import faulthandler  # noqa: E402
faulthandler.register(signal.SIGUSR1)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def maybe(at: str) -> None:
    if point == at and rng.random() < p:
        die()


class _Os:
    """``os`` as the writer module sees it, with a write that can tear."""

    def __getattr__(self, attr):
        return getattr(os, attr)

    @staticmethod
    def write(fd, data):
        if point == "partial" and len(data) > 1 and rng.random() < p:
            os.write(fd, bytes(data[:rng.randint(1, len(data) - 1)]))
            die()
        return os.write(fd, data)


writer_mod.os = _Os()
_write_out = PartitionWriter._write_out


def _write_out_then_maybe_die(self):
    _write_out(self)
    maybe("written")


PartitionWriter._write_out = _write_out_then_maybe_die
_index_write = writer_mod.SegmentIndex.write


def _index_write_then_maybe_die(self, path):
    _index_write(self, path)
    maybe("index")


writer_mod.SegmentIndex.write = _index_write_then_maybe_die
_create = PartitionWriter._create_active


def _create_then_maybe_die(self, base):
    _create(self, base)
    maybe("created")


PartitionWriter._create_active = _create_then_maybe_die
_maintain = writer_mod.maintain


def _maintain_then_maybe_die(*args, **kwargs):
    report = _maintain(*args, **kwargs)
    maybe("maintain")
    return report


writer_mod.maintain = _maintain_then_maybe_die
_hint_write = writer_mod.TailHint.write


def _hint_then_maybe_die(self, path):
    _hint_write(self, path)
    maybe("hint")


writer_mod.TailHint.write = _hint_then_maybe_die

log = Log(root, **config)
meta = log.admin.stream_meta("s")
writer = PartitionWriter(log.root, meta, 0, log.settings.for_stream("s", meta.config),
                         system=log.settings.system, sharing=WriterSharing.SHARED)
segment_bytes = int(config.get("segment_bytes", 1 << 30))
keys = int(os.environ.get("STRESS_KEYS", "0"))  # 0: every record its own key (kept by compaction)
acks = os.open(acks_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
seq = 0
while True:
    for _ in range(rng.randint(1, 30)):
        pad = (segment_bytes + rng.randint(1, 500) if rng.random() < 0.01
               else rng.randint(0, 200))
        head = b"%s:%d:%d:" % (name.encode(), incarnation, seq)
        key = head if not keys else b"%s:%d:%d" % (name.encode(), incarnation, seq % keys)
        writer.append(key, head + b"x" * pad, 1000 + seq)
        seq += 1
    writer.flush()
    os.write(acks, b"%d:%d\n" % (incarnation, seq - 1))
