"""The currency example on the file log: a `currency-codes` bootstrap stream (4 partitions)
and a `transactions` stream. No transaction may be processed before every currency code
written before the job started has been processed.

Everything is real: file-log streams on disk written by a producer, the system registry with
JSON serdes, starting offsets from config, the DefaultChooser and SystemConsumers; new codes
and transactions keep arriving from another thread while the job runs.
"""

from __future__ import annotations

import random
import threading

import pytest

from weir.engine.consumers.consumers import SystemConsumers
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.consumers.offsets import CaughtUpFilter, starting_offsets
from weir.engine.config.streams import job_inputs
from weir.engine.systems.api import StreamSpec
from weir.stores.config import Config

pytest.importorskip("weir.engine.systems.filelog", reason="the file log system is not built yet")
from weir.engine.systems.registry import SystemRegistry  # noqa: E402

CODES = SystemStream("filelog", "currency-codes")
TX = SystemStream("filelog", "transactions")
CURRENCIES = [f"C{i:03d}" for i in range(240)]


def job_config(root) -> Config:
    return Config({
        "systems.filelog.factory": "filelog",
        "systems.filelog.root": str(root),
        "systems.filelog.samza.key.serde": "string",
        "systems.filelog.samza.msg.serde": "json",
        "systems.filelog.default.stream.samza.offset.default": "oldest",
        "task.inputs": "filelog.transactions,filelog.currency-codes",
        "systems.filelog.streams.currency-codes.samza.bootstrap": "true",
        "task.poll.interval.ms": "5",
    })


def send(producer, registry, ss, key, value, partition):
    serdes = registry.serdes_for(ss)
    producer.send("e2e", OutgoingMessageEnvelope(
        ss, serdes.serialize_message(value), key=serdes.serialize_key(key), partition=partition))


@pytest.fixture
def streams(tmp_path):
    cfg = job_config(tmp_path / "log")
    registry = SystemRegistry(cfg)
    admin = registry.admin("filelog")
    admin.create_stream(StreamSpec(CODES.stream, 4))
    admin.create_stream(StreamSpec(TX.stream, 2))
    producer = registry.producer("filelog")
    producer.register("e2e")
    producer.start()
    rng = random.Random(7)
    # Transactions first, so they are on disk (and polled) long before most codes.
    for i in range(400):
        send(producer, registry, TX, f"tx-{i}", {"id": i, "currency": rng.choice(CURRENCIES),
                                                  "amount": rng.randint(1, 999)}, i % 2)
    # Skewed codes: partition 3 holds most of them, so it is the last to catch up.
    for i, code in enumerate(CURRENCIES):
        partition = 3 if i % 4 == 0 or i > 60 else i % 3
        send(producer, registry, CODES, code, {"code": code, "rate": 1 + i / 100}, partition)
    producer.flush("e2e")
    producer.stop()
    return cfg, registry


def test_no_transaction_is_processed_before_every_code_written_before_start(streams):
    cfg, registry = streams
    inputs = job_inputs(cfg)
    ssps = [SystemStreamPartition(ss.system, ss.stream, p)
            for ss, n in registry.partition_counts(inputs).items() for p in range(n)]
    metadata = registry.metadata(ssps)
    codes_before_start = sum(md.upcoming - md.oldest for s, md in metadata.items()
                             if s.stream == CODES.stream)
    assert codes_before_start == len(CURRENCIES)
    starting = starting_offsets(cfg, ssps, {}, metadata)
    assert all(offset == 0 for offset in starting.values())

    sc = SystemConsumers.from_registry(registry, ["filelog"])
    caught_up = CaughtUpFilter(starting, metadata)
    for ssp, offset in starting.items():
        sc.register(ssp, offset)
    sc.start()

    # While the job runs, another writer keeps adding codes and transactions.
    late_producer = registry.producer("filelog")
    late_producer.register("late")
    late_producer.start()
    late = threading.Thread(target=lambda: [
        (send(late_producer, registry, CODES, f"L{i}", {"code": f"L{i}", "rate": 2.0}, i % 4),
         send(late_producer, registry, TX, f"late-tx-{i}", {"id": 400 + i, "currency": "C000",
                                                            "amount": 1}, i % 2),
         late_producer.flush("late")) for i in range(40)])
    late.start()

    rates: dict[str, float] = {}
    codes_processed = 0
    transactions = []
    try:
        while len(transactions) < 440:
            envelope = sc.choose(timeout=1.0)
            if envelope is None or not caught_up.accept(envelope):
                continue
            if envelope.ssp.stream == CODES.stream:
                rates[envelope.key] = envelope.message["rate"]
                codes_processed += 1
            else:
                # The guarantee under test: every code present at start is already in.
                assert codes_processed >= codes_before_start, (
                    f"transaction {envelope.message['id']} processed after only "
                    f"{codes_processed} of {codes_before_start} currency codes")
                assert envelope.message["currency"] in rates
                transactions.append(envelope.message["amount"] * rates[envelope.message["currency"]])
    finally:
        late.join()
        late_producer.stop()
        sc.stop()

    assert not sc.bootstrap.active
    assert len(rates) >= len(CURRENCIES) and len(transactions) == 440
