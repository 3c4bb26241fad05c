"""Property test of the file log's transactional readers against a model.

Random interleavings of two transactional producers (sends, flushes, commits, aborts,
restarts that abort or roll forward the previous incarnation's transaction, sends of the
zombie left behind by a restart) and a plain producer, on one partition with tiny segments
and batches (so batches cross rolls, seeks land inside batches, sealed segments get
compressed). The model knows only which values were committed; the log must agree:

* ``read_committed`` delivers exactly the plain values and the values of committed
  transactions, each once, in the order each producer sent them; never a value of an
  aborted transaction or of a zombie;
* started at any offset it delivers exactly the full read's records at or after that offset;
* ``read_uncommitted`` delivers every committed and plain value too;
* while a transaction is open, ``read_committed`` delivers nothing sent after it began.

40 examples by default (a few seconds); ``WEIR_PROPERTY_EXAMPLES=1000`` for a long run.
"""

from __future__ import annotations

import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.engine.errors import ProducerFencedError
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.filelog import FileLogAdmin, FileLogProducer, FileLogSettings
from weir.engine.systems.filelog.settings import IsolationLevel
from weir.engine.systems.filelog.transactions import TransactionalProducer
from weir.stores.config import Config

OUT = SystemStream("fl", "s")

_op = st.one_of(
    st.tuples(st.just("send"), st.integers(0, 1)),
    st.tuples(st.just("send"), st.integers(0, 1)),
    st.tuples(st.just("send"), st.integers(0, 1)),
    st.tuples(st.just("plain"), st.just(0)),
    st.tuples(st.just("flush"), st.integers(0, 1)),
    st.tuples(st.just("commit"), st.integers(0, 1)),
    st.tuples(st.just("abort"), st.integers(0, 1)),
    st.tuples(st.just("restart"), st.integers(0, 1)),
    st.tuples(st.just("restart-prepared-commit"), st.integers(0, 1)),
    st.tuples(st.just("restart-prepared-abort"), st.integers(0, 1)),
    st.tuples(st.just("zombie"), st.integers(0, 1)),
)


class _Run:
    def __init__(self, root: str, compression: str):
        config = Config({"systems.fl.root": root, "systems.fl.segment.bytes": "700",
                         "systems.fl.producer.batch.size": "150",
                         "systems.fl.compression": compression,
                         "systems.fl.producer.buffer.bytes": "300"})
        self.settings = FileLogSettings.from_config("fl", config)
        self.admin = FileLogAdmin(self.settings)
        self.admin.create_stream(StreamSpec("s", 1))
        self.plain = FileLogProducer(self.settings)
        self.plain.register("plain")
        self.live = [self._producer(i) for i in range(2)]
        self.zombies: list[TransactionalProducer | None] = [None, None]
        self.pending: list[list[bytes]] = [[], []]   # sent in the open transaction
        self.committed: list[bytes] = []
        self.sources: dict[bytes, str] = {}
        self.never: set[bytes] = set()               # aborted or a zombie's
        self.n = 0

    def _producer(self, i: int, decide=None) -> TransactionalProducer:
        producer = TransactionalProducer(self.settings, f"job-1/Partition {i}")
        producer.init_transactions(decide)
        return producer

    def value(self, source: str) -> bytes:
        self.n += 1
        value = b"%s-%04d" % (source.encode(), self.n)
        self.sources[value] = source
        return value

    def apply(self, op: str, i: int) -> None:
        if op == "send":
            value = self.value(f"p{i}")
            self.live[i].send("t", OutgoingMessageEnvelope(OUT, value, key=b"k", partition=0))
            self.pending[i].append(value)
        elif op == "plain":
            value = self.value("plain")
            self.plain.send("plain", OutgoingMessageEnvelope(OUT, value, key=None, partition=0))
            self.committed.append(value)
        elif op == "flush":
            self.live[i].flush()
        elif op == "commit":
            if self.live[i].prepare() is not None:
                self.live[i].commit()
            self.committed.extend(self.pending[i])
            self.pending[i] = []
        elif op == "abort":
            self.live[i].abort()
            self.never.update(self.pending[i])
            self.pending[i] = []
        elif op.startswith("restart"):
            old = self.live[i]
            decision = None
            if op != "restart":
                txn = old.prepare()
                decision = op.endswith("commit") and txn is not None
            old._owner.release()  # the old incarnation "dies" (its lock is gone)
            self.zombies[i] = old
            self.live[i] = self._producer(i, decide=lambda t, d=decision: bool(d))
            if decision:
                self.committed.extend(self.pending[i])
            else:
                self.never.update(self.pending[i])
            self.pending[i] = []
        elif op == "zombie" and self.zombies[i] is not None:
            value = self.value(f"z{i}")
            self.never.add(value)
            try:
                self.zombies[i].send("t", OutgoingMessageEnvelope(OUT, value, key=b"k",
                                                                  partition=0))
                self.zombies[i].flush()
            except (ProducerFencedError, Exception) as exc:  # noqa: BLE001
                assert isinstance(exc, ProducerFencedError) or "prepared" in str(exc), exc

    def read(self, isolation: IsolationLevel, start: int = 0):
        self.plain.flush("plain")
        for producer in self.live:
            for writer in producer._writers.values():
                with writer.mutex:
                    writer.flush()
        reader = self.admin.reader("s", 0, start, isolation=isolation)
        try:
            return reader.read_records(10**9)
        finally:
            reader.close()

    def finish(self) -> None:
        for i in range(2):
            self.apply("commit", i)

    def close(self) -> None:
        for producer in self.live:
            producer.stop()
        self.plain.stop()


def _check_order(values: list[bytes], sources: dict[bytes, str]) -> None:
    """Per source, values come in the order they were sent (their numbers grow)."""
    last: dict[str, bytes] = {}
    for value in values:
        source = sources[value]
        assert last.get(source, b"") < value, (source, last.get(source), value)
        last[source] = value


@settings(max_examples=int(os.environ.get("WEIR_PROPERTY_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_op, min_size=1, max_size=60), compression=st.sampled_from(["none", "zstd"]),
       starts=st.lists(st.integers(0, 400), min_size=1, max_size=4))
def test_read_committed_delivers_exactly_the_committed_values_in_order(ops, compression,
                                                                       starts):
    with tempfile.TemporaryDirectory() as root:
        run = _Run(root, compression)
        try:
            for op, i in ops:
                run.apply(op, i)
                # while transactions are open, what is visible is committed or plain
                if op in ("commit", "plain", "flush"):
                    seen = [r.value for r in run.read(IsolationLevel.READ_COMMITTED)]
                    assert set(seen) <= set(run.committed), set(seen) - set(run.committed)
                    assert len(seen) == len(set(seen))
            run.finish()
            full = run.read(IsolationLevel.READ_COMMITTED)
            values = [r.value for r in full]
            assert sorted(values) == sorted(run.committed)
            assert len(values) == len(set(values))
            assert not set(values) & run.never
            _check_order(values, run.sources)
            offsets = [r.offset for r in full]
            assert offsets == sorted(offsets)
            uncommitted = {r.value for r in run.read(IsolationLevel.READ_UNCOMMITTED)}
            assert set(run.committed) <= uncommitted
            ssp = SystemStreamPartition("fl", "s", 0)
            upcoming = run.admin.metadata([ssp])[ssp].upcoming
            for start in starts:
                start = start % (upcoming + 1)
                part = run.read(IsolationLevel.READ_COMMITTED, start)
                assert part == [r for r in full if r.offset >= start], start
        finally:
            run.close()
