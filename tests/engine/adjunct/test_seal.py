"""Seal markers: ``weir log produce --seal`` and :func:`seal_dataset` write the reserved key
with a null message, which a versioned adjunct store reads as the end of a version."""

from __future__ import annotations

import io
import sys

import pytest

from weir.engine.adjunct import SEAL_KEY, is_seal, seal_dataset
from weir.engine.cli import main
from weir.engine.errors import EngineError
from weir.engine.model import SystemStreamPartition
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config


def _records(registry, stream, partition):
    ssp = SystemStreamPartition("filelog", stream, partition)
    consumer = registry.consumer("filelog")
    consumer.register(ssp, 0)
    consumer.start()
    try:
        got = consumer.poll([ssp], 0.2).get(ssp, [])
    finally:
        consumer.stop()
    return [(e.key, e.message) for e in got if not e.is_end_of_stream]


def test_weir_log_produce_seal_writes_a_seal_marker_after_the_records(tmp_path, capsys,
                                                                      monkeypatch):
    root = str(tmp_path / "log")
    assert main(["log", "create", "model", "--partitions", "2", "--root", root]) == 0
    monkeypatch.setattr(sys, "stdin", io.StringIO("a=1\nb=2\n"))
    assert main(["log", "produce", "model", "--format", "kv", "--partition", "1", "--seal",
                 "--root", root]) == 0
    out = capsys.readouterr().out
    assert "sealed p1@2" in out
    registry = SystemRegistry(Config({"systems.filelog.factory": "filelog",
                                      "systems.filelog.root": root}))
    records = _records(registry, "model", 1)
    assert [k for k, _ in records] == [b"a", b"b", SEAL_KEY.encode()]
    assert is_seal(*records[-1]) and not is_seal(*records[0])
    assert _records(registry, "model", 0) == []


def test_seal_dataset_seals_every_partition_with_the_streams_key_serde(tmp_path):
    cfg = Config({"systems.filelog.factory": "filelog",
                  "systems.filelog.root": str(tmp_path / "log"),
                  "systems.filelog.samza.key.serde": "json"})
    registry = SystemRegistry(cfg)
    from weir.engine.systems.api import StreamSpec
    registry.admin("filelog").create_stream(StreamSpec("model", 3))
    assert seal_dataset(registry, "filelog", "model") == {0: 0, 1: 0, 2: 0}
    key, message = _records(registry, "model", 2)[0]
    assert key == b'"__weir.seal__"' and message is None  # the serde's encoding of the key


def test_a_stream_whose_keys_cannot_be_the_seal_key_is_refused(tmp_path):
    cfg = Config({"systems.filelog.factory": "filelog",
                  "systems.filelog.root": str(tmp_path / "log"),
                  "systems.filelog.samza.key.serde": "int64"})
    registry = SystemRegistry(cfg)
    from weir.engine.systems.api import StreamSpec
    registry.admin("filelog").create_stream(StreamSpec("model", 1))
    with pytest.raises(EngineError, match="cannot write the seal key"):
        seal_dataset(registry, "filelog", "model")


def test_weir_log_produce_seal_empty_writes_the_empty_seal_marker(tmp_path, capsys, monkeypatch):
    from weir.engine.adjunct import EMPTY_SEAL_KEY, SealKind, seal_kind
    root = str(tmp_path / "log")
    assert main(["log", "create", "model", "--root", root]) == 0
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert main(["log", "produce", "model", "--seal-empty", "--root", root]) == 0
    assert "sealed (empty on purpose) p0@0" in capsys.readouterr().out
    registry = SystemRegistry(Config({"systems.filelog.factory": "filelog",
                                      "systems.filelog.root": root}))
    (record,) = _records(registry, "model", 0)
    assert record == (EMPTY_SEAL_KEY.encode(), None) and seal_kind(*record) is SealKind.EMPTY
    assert seal_kind(SEAL_KEY, None) is SealKind.DATASET and seal_kind(SEAL_KEY, b"x") is None


def test_the_seal_key_is_written_by_a_plain_streams_key_serde_and_raw_on_an_intermediate_one():
    from weir.engine.adjunct import seal_key_bytes
    from weir.engine.config.serdes import SerdeManager, WireFormat
    from weir.engine.model import SystemStream

    serdes = SerdeManager(Config({
        "systems.filelog.samza.key.serde": "json",
        "systems.filelog.streams.mid.samza.intermediate": "true"}))
    plain, mid = (serdes.for_stream(SystemStream("filelog", s)) for s in ("model", "mid"))
    assert plain.wire_format is WireFormat.PLAIN and mid.wire_format is WireFormat.INTERMEDIATE
    assert mid.key_serde is not None and mid.key_serde.name == "json"   # the inner key serde
    assert seal_key_bytes(plain) == b'"' + SEAL_KEY.encode() + b'"'
    # An intermediate stream hands null-message records over with raw keys: the seal stays raw.
    assert seal_key_bytes(mid) == SEAL_KEY.encode()
