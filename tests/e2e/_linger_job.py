"""The job of tests/e2e/test_linger_sigkill.py (``tests.e2e._linger_job:EchoCommitAt``)."""

from __future__ import annotations

from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.engine.task import RequestScope, StreamTask

__all__ = ["EchoCommitAt"]

OUT = SystemStream("filelog", "echo")


class EchoCommitAt(StreamTask):
    """Sends ``<partition>:<offset>`` of every message to ``echo`` (same partition), and asks
    for a commit of its task after the message ``commit``."""

    def process(self, envelope, collector, coordinator):
        ssp = envelope.ssp
        collector.send(OutgoingMessageEnvelope(OUT, f"{ssp.partition}:{envelope.offset}".encode(),
                                               key=None, partition=ssp.partition))
        if envelope.message == b"commit":
            coordinator.commit(RequestScope.CURRENT_TASK)
