"""``weir log create|produce|tail|describe`` through engine.cli.main, on real file logs and on a
memory system named in a job config; one run of the installed ``weir`` script."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from weir.engine.cli import main
from weir.engine.systems.memory import reset_memory_systems

try:
    from weir.engine.systems.filelog import FileLogSystemFactory
except ImportError:  # the file log is being built concurrently
    FileLogSystemFactory = None

needs_filelog = pytest.mark.skipif(FileLogSystemFactory is None,
                                   reason="engine/systems/filelog is not built yet")


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "log")


@pytest.fixture
def mem_config(tmp_path):
    """A job config with a memory system whose 'orders' stream has string keys, JSON values."""
    system = f"mem{uuid.uuid4().hex[:8]}"
    path = tmp_path / "job.properties"
    path.write_text(f"systems.{system}.factory=memory\n"
                    f"systems.{system}.streams.orders.samza.key.serde=string\n"
                    f"systems.{system}.streams.orders.samza.msg.serde=json\n")
    yield ["--config", str(path), "--system", system]
    reset_memory_systems(system)


def run(capsys, *argv, stdin: str | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(["log", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def records(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("partition=")]


# -- file log (the default system) ----------------------------------------------------------

@needs_filelog
def test_create_produce_tail_describe_on_a_file_log(capsys, monkeypatch, root):
    code, out, _ = run(capsys, "create", "orders", "--partitions", "2", "--root", root)
    assert code == 0 and "created filelog.orders with 2 partition(s)" in out
    code, out, _ = run(capsys, "create", "orders", "--partitions", "2", "--root", root)
    assert code == 0 and "already exists" in out
    assert (Path(root) / "orders").is_dir()

    code, out, _ = run(capsys, "produce", "orders", "--format", "kv", "--root", root,
                       stdin="ann=1\nbob=2\n\nann=3\n", monkeypatch=monkeypatch)
    assert code == 0
    assert out.startswith("produced 3 record(s) to filelog.orders in ")
    assert "1 blank line(s) skipped" in out and out.count("\n") == 1

    code, out, err = run(capsys, "tail", "orders", "--root", root)
    lines = records(out)
    assert code == 0 and len(lines) == 3
    assert all("timestamp=" in line for line in lines)
    ann = [line for line in lines if "key=ann" in line]
    assert [line.split("value=")[1] for line in ann] == ["1", "3"]
    assert "offset=0" in ann[0] and "offset=1" in ann[1]
    assert err.startswith("read 3 record(s) from filelog.orders")

    code, out, _ = run(capsys, "describe", "orders", "--root", root)
    assert code == 0
    for column in ("partition", "oldest", "newest", "upcoming", "segments", "bytes", "ended"):
        assert column in out
    assert "3 offset(s) across 2 partition(s)" in out


@needs_filelog
def test_produce_from_a_json_file_keyed_by_a_field(capsys, tmp_path, root):
    data = tmp_path / "in.jsonl"
    data.write_text('{"user": "ann", "n": 1}\n{"user": "bob", "n": 2}\n{"user": "ann", "n": 3}\n')
    run(capsys, "create", "events", "--partitions", "4", "--root", root)
    code, out, _ = run(capsys, "produce", "events", "--file", str(data), "--format", "json",
                       "--key-field", "user", "--root", root)
    assert code == 0 and "produced 3 record(s)" in out
    lines = records(run(capsys, "tail", "events", "--root", root)[1])
    ann = [line for line in lines if "key=ann" in line]
    assert len(ann) == 2 and len({line.split()[0] for line in ann}) == 1  # same partition
    assert '"n": 1' in ann[0] or '"n":1' in ann[0]


@needs_filelog
def test_tail_from_an_offset_with_max_and_one_partition(capsys, monkeypatch, root):
    run(capsys, "create", "nums", "--partitions", "2", "--root", root)
    run(capsys, "produce", "nums", "--partition", "1", "--root", root,
        stdin="".join(f"{i}\n" for i in range(10)), monkeypatch=monkeypatch)
    lines = records(run(capsys, "tail", "nums", "--partition", "1", "--from", "4", "--max", "3",
                        "--root", root)[1])
    assert [line.split()[1] for line in lines] == ["offset=4", "offset=5", "offset=6"]
    assert [line.split("value=")[1] for line in lines] == ["4", "5", "6"]
    lines = records(run(capsys, "tail", "nums", "--from", "newest", "--root", root)[1])
    assert lines == [line for line in lines if "offset=9" in line] and len(lines) == 1
    assert records(run(capsys, "tail", "nums", "--from", "upcoming", "--root", root)[1]) == []


@needs_filelog
def test_bounded_stream_ended_by_produce_shows_in_describe_and_follow(capsys, monkeypatch, root):
    run(capsys, "create", "batch", "--bounded", "--root", root)
    code, out, _ = run(capsys, "produce", "batch", "--end", "--root", root, stdin="a\nb\n",
                       monkeypatch=monkeypatch)
    assert code == 0 and "stream ended" in out
    out = run(capsys, "tail", "batch", "--follow", "--root", root)[1]
    assert out.splitlines()[-1] == "partition=0 offset=2 end-of-stream"
    assert "yes" in run(capsys, "describe", "batch", "--root", root)[1]


@needs_filelog
def test_compacted_stream_is_created_compacted(capsys, root):
    code, out, _ = run(capsys, "create", "state", "--compact", "--partitions", "3", "--root", root)
    assert code == 0 and "compact" in out


@needs_filelog
def test_missing_stream_and_bad_arguments_are_clear_errors(capsys, monkeypatch, root):
    code, _, err = run(capsys, "tail", "ghost", "--root", root)
    assert code == 2 and "filelog.ghost" in err and "weir log create ghost" in err
    assert f"does not exist in {os.path.abspath(root)}" in err
    run(capsys, "create", "orders", "--root", root)
    code, _, err = run(capsys, "produce", "orders", "--partition", "3", "--root", root, stdin="x\n",
                       monkeypatch=monkeypatch)
    assert code == 2 and "partitions 0..0" in err
    code, _, err = run(capsys, "produce", "orders", "--format", "json", "--root", root,
                       stdin='{"ok": 1}\n{broken\n', monkeypatch=monkeypatch)
    assert code == 2 and "stdin line 2" in err and "1 record(s) before it were produced" in err
    code, _, err = run(capsys, "tail", "orders", "--from", "yesterday", "--root", root)
    assert code == 2 and "--from 'yesterday'" in err


@needs_filelog
def test_stream_not_found_names_the_default_root_it_searched(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "describe", "ghost")
    assert code == 2
    assert f"stream 'filelog.ghost' does not exist in {tmp_path / 'weir-data' / 'log'}" in err
    assert f"weir log create ghost --root {tmp_path / 'weir-data' / 'log'}" in err


@needs_filelog
def test_tail_prints_the_end_of_stream_marker_of_every_ended_partition(capsys, monkeypatch,
                                                                      root):
    run(capsys, "create", "batch", "--bounded", "--partitions", "3", "--root", root)
    run(capsys, "produce", "batch", "--partition", "1", "--end", "--root", root,
        stdin="a\nb\n", monkeypatch=monkeypatch)

    code, out, err = run(capsys, "tail", "batch", "--root", root)

    assert code == 0
    assert sorted(line for line in out.splitlines() if "end-of-stream" in line) == [
        "partition=0 offset=0 end-of-stream", "partition=1 offset=2 end-of-stream",
        "partition=2 offset=0 end-of-stream"]
    assert len(records(out)) == 5 and "read 2 record(s)" in err and "3 ended" in err
    # The marker comes after the partition's records.
    p1 = [line for line in out.splitlines() if line.startswith("partition=1 ")]
    assert p1[-1] == "partition=1 offset=2 end-of-stream"


@needs_filelog
def test_tail_of_a_bounded_stream_that_has_not_ended_prints_no_marker(capsys, monkeypatch, root):
    run(capsys, "create", "batch", "--bounded", "--root", root)
    run(capsys, "produce", "batch", "--root", root, stdin="a\n", monkeypatch=monkeypatch)
    out = run(capsys, "tail", "batch", "--root", root)[1]
    assert "end-of-stream" not in out and len(records(out)) == 1


@needs_filelog
def test_create_help_explains_partitions_and_shows_the_default(capsys):
    with pytest.raises(SystemExit):
        main(["log", "create", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "number of partitions" in out and "(default: 1)" in out
    assert "./weir-data/log" in out  # where --root defaults to


@needs_filelog
def test_list_shows_every_stream_with_partitions_records_size_policy_and_end(capsys, monkeypatch,
                                                                              root):
    run(capsys, "create", "orders", "--partitions", "2", "--root", root)
    run(capsys, "produce", "orders", "--root", root, stdin="a\nb\nc\n", monkeypatch=monkeypatch)
    run(capsys, "create", "batch", "--bounded", "--root", root)
    run(capsys, "produce", "batch", "--end", "--root", root, stdin="x\n", monkeypatch=monkeypatch)
    run(capsys, "create", "table", "--compact", "--root", root)

    code, out, _ = run(capsys, "list", "--root", root)

    assert code == 0
    assert f"filelog: 3 stream(s) (root {os.path.abspath(root)})" in out
    cells = {name: [c.strip() for c in line.split("│")[1:-1]]
             for name, line in ((line.split()[1], line) for line in out.splitlines()
                                if line.startswith("│"))}
    assert cells["orders"] == ["orders", "2", "3", cells["orders"][3], "delete", "no", "-"]
    assert cells["batch"][1:3] == ["1", "1"] and cells["batch"][4:] == ["delete", "yes", "yes"]
    assert cells["table"][2] == "<= 0" and cells["table"][4] == "compact"
    assert cells["orders"][3].endswith(" B")
    assert "4 record(s)" in out and "in 3 stream(s)" in out

    code, out, _ = run(capsys, "list", "--json", "--root", root)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["stream"] for r in rows] == ["batch", "orders", "table"]
    assert rows[1] == {"stream": "orders", "partitions": 2, "records": 3, "records_exact": True,
                       "bytes": rows[1]["bytes"], "cleanup_policy": "delete", "bounded": False,
                       "ended_partitions": 0}
    assert rows[0]["ended_partitions"] == 1 and rows[2]["records_exact"] is False


@needs_filelog
def test_list_of_an_empty_root_names_the_root(capsys, root):
    code, out, _ = run(capsys, "list", "--root", root)
    assert code == 0 and f"no streams in filelog (root {os.path.abspath(root)})" in out


@needs_filelog
def test_delete_needs_yes_and_then_removes_the_stream(capsys, monkeypatch, root):
    run(capsys, "create", "orders", "--partitions", "2", "--root", root)
    run(capsys, "produce", "orders", "--root", root, stdin="a\nb\n", monkeypatch=monkeypatch)

    code, _, err = run(capsys, "delete", "orders", "--root", root)
    assert code == 2 and "not deleting filelog.orders" in err and "--yes" in err
    assert "2 partition(s), 2 record(s)" in err
    assert (Path(root) / "orders" / "stream.json").exists()

    code, out, _ = run(capsys, "delete", "orders", "--yes", "--root", root)
    assert code == 0 and out.startswith(f"deleted filelog.orders in {os.path.abspath(root)}")
    assert not (Path(root) / "orders").exists()
    code, _, err = run(capsys, "delete", "orders", "--yes", "--root", root)
    assert code == 2 and "does not exist" in err


@needs_filelog
def test_delete_is_refused_while_a_producer_holds_a_partition(capsys, root):
    from weir.engine.model import OutgoingMessageEnvelope, SystemStream
    from weir.engine.systems.registry import SystemRegistry
    from weir.stores.config import Config

    run(capsys, "create", "live", "--root", root)
    producer = SystemRegistry(Config({"systems.filelog.root": root})).producer("filelog")
    producer.register("t")
    producer.start()
    producer.send("t", OutgoingMessageEnvelope(SystemStream("filelog", "live"), b"x",
                                               partition=0))
    producer.flush("t")
    try:
        code, _, err = run(capsys, "delete", "live", "--yes", "--root", root)
        assert code == 2 and "partition 0 has a producer" in err and f"pid {os.getpid()}" in err
    finally:
        producer.stop()
    assert run(capsys, "delete", "live", "--yes", "--root", root)[0] == 0


# -- any configured system ------------------------------------------------------------------

def test_commands_work_on_a_configured_memory_system_with_serdes(capsys, monkeypatch, mem_config):
    code, out, _ = run(capsys, "create", "orders", "--partitions", "3", *mem_config)
    assert code == 0 and "created" in out
    code, out, _ = run(capsys, "produce", "orders", "--format", "json", "--key-field", "user",
                       *mem_config, stdin='{"user": "ann", "amount": 3}\n{"user": "bob", "amount": 4}\n',
                       monkeypatch=monkeypatch)
    assert code == 0 and "produced 2 record(s)" in out
    lines = records(run(capsys, "tail", "orders", *mem_config)[1])
    assert sorted(line.split(" key=")[1] for line in lines) == \
        ['ann value={"amount":3,"user":"ann"}', 'bob value={"amount":4,"user":"bob"}']
    out = run(capsys, "describe", "orders", *mem_config)[1]
    assert "2 offset(s) across 3 partition(s)" in out
    out = run(capsys, "list", "--json", *mem_config)[1]
    assert json.loads(out)["records"] == 2 and json.loads(out)["partitions"] == 3
    code, _, err = run(capsys, "delete", "orders", "--yes", *mem_config)
    assert code == 2 and "cannot delete streams" in err


def test_kv_values_are_fitted_to_the_stream_serdes(capsys, monkeypatch, mem_config):
    run(capsys, "create", "orders", *mem_config)
    run(capsys, "produce", "orders", "--format", "kv", *mem_config,
        stdin='k1={"a": [1, 2]}\nk2=plain words\n', monkeypatch=monkeypatch)
    lines = records(run(capsys, "tail", "orders", *mem_config)[1])
    assert [line.split(" key=")[1] for line in lines] == ['k1 value={"a":[1,2]}',
                                                          'k2 value=plain words']


def test_key_field_needs_json_and_unknown_system_names_the_key(capsys, monkeypatch, mem_config):
    code, _, err = run(capsys, "produce", "orders", "--key-field", "user", *mem_config,
                       stdin="x\n", monkeypatch=monkeypatch)
    assert code == 2 and "--key-field needs --format json" in err
    code, _, err = run(capsys, "describe", "orders", "--system", "kafka",
                       *mem_config[:2])
    assert code == 2 and "systems.kafka.factory" in err


# -- the installed script ---------------------------------------------------------------------

@needs_filelog
def test_weir_script_creates_and_describes_a_stream(tmp_path):
    weir = Path(sys.executable).parent / "weir"
    if not weir.exists():
        pytest.skip("the weir console script is not installed in this environment")
    root = str(tmp_path / "log")
    env = {**os.environ, "COLUMNS": "120"}
    subprocess.run([str(weir), "log", "create", "clicks", "--partitions", "2", "--root", root],
                   check=True, capture_output=True, text=True, env=env, timeout=60)
    produced = subprocess.run([str(weir), "log", "produce", "clicks", "--root", root],
                              input="a\nb\nc\n", check=True, capture_output=True, text=True,
                              env=env, timeout=60)
    assert "produced 3 record(s)" in produced.stdout
    described = subprocess.run([str(weir), "log", "describe", "clicks", "--root", root],
                               check=True, capture_output=True, text=True, env=env, timeout=60)
    assert "3 offset(s) across 2 partition(s)" in described.stdout


@needs_filelog
def test_tail_follow_prints_records_produced_while_it_waits(capsys, root):
    import threading

    from weir.engine.model import OutgoingMessageEnvelope, SystemStream
    from weir.engine.systems.registry import SystemRegistry
    from weir.stores.config import Config

    run(capsys, "create", "live", "--root", root)
    codes = []
    tail = threading.Thread(target=lambda: codes.append(
        main(["log", "tail", "live", "--follow", "--max", "2", "--root", root])))
    tail.start()
    producer = SystemRegistry(Config({"systems.filelog.root": root})).producer("filelog")
    producer.register("t")
    producer.start()
    for value in (b"first", b"second", b"third"):
        producer.send("t", OutgoingMessageEnvelope(SystemStream("filelog", "live"), value,
                                                   partition=0))
        producer.flush("t")
    producer.stop()
    tail.join(60)
    out, err = capsys.readouterr()
    assert codes == [0]
    assert [line.split("value=")[1] for line in records(out)] == ["first", "second"]
    assert "read 2 record(s)" in err


# -- transactions ---------------------------------------------------------------------------

def _transactional_stream(root: str) -> int:
    """A stream with a committed, an aborted and an open transaction; returns the producer id."""
    from weir.engine.model import OutgoingMessageEnvelope, SystemStream
    from weir.engine.systems.filelog import FileLogSettings
    from weir.engine.systems.filelog.admin import FileLogAdmin
    from weir.engine.systems.api import StreamSpec
    from weir.engine.systems.filelog.transactions import TransactionalProducer
    settings = FileLogSettings("filelog", root)
    FileLogAdmin(settings).create_stream(StreamSpec("out", 1))
    producer = TransactionalProducer(settings, "job-1/Partition 0")
    producer.init_transactions()
    out = SystemStream("filelog", "out")
    for value, end in ((b"kept", "commit"), (b"dropped", "abort"), (b"pending", None)):
        producer.send("t", OutgoingMessageEnvelope(out, value, key=b"k", partition=0))
        producer.flush()
        if end == "commit":
            producer.prepare()
            producer.commit()
        elif end == "abort":
            producer.abort()
    pid = producer.producer_id
    from weir.engine.systems.filelog import _shared
    producer._owner.release()  # its process is gone, the transaction stays open
    for writer in producer._writers.values():
        _shared.release(writer)
    return pid


@needs_filelog
def test_tail_shows_markers_flagged_and_hides_aborted_records_unless_asked(capsys, root):
    pid = _transactional_stream(root)
    code, out, err = run(capsys, "tail", "out", "--root", root)
    lines = records(out)
    assert code == 0 and len(lines) == 3
    assert lines[0].endswith("key=k value=kept")
    assert "marker=commit" in lines[1] and f"producer={pid} epoch=0 transaction=1" in lines[1]
    assert "marker=abort" in lines[2] and "transaction=2" in lines[2]
    assert "dropped" not in out and "pending" not in out   # aborted hidden, open held back
    assert "1 record(s)" in err and "2 transaction marker(s)" in err
    lines = records(run(capsys, "tail", "out", "--read-uncommitted", "--root", root)[1])
    assert [line.split("value=")[1] for line in lines if "value=" in line] == \
        ["kept", "dropped  (aborted)", "pending  (open)"]


@needs_filelog
def test_transactions_lists_open_ones_and_resolve_aborts_those_of_gone_producers(capsys, root):
    pid = _transactional_stream(root)
    code, out, _ = run(capsys, "transactions", "out", "--root", root)
    assert code == 0 and str(pid) in out and "job-1/Partition 0" in out
    assert "1 open transaction(s)" in out
    assert "(1 open)" in run(capsys, "describe", "out", "--root", root)[1]
    out = run(capsys, "transactions", "out", "--resolve", "--root", root)[1]
    assert "aborted transaction 3 of 'job-1/Partition 0'" in out
    assert "0 open transaction(s)" in run(capsys, "transactions", "out", "--root", root)[1]
    lines = records(run(capsys, "tail", "out", "--root", root)[1])
    assert [line for line in lines if "value=" in line][0].endswith("value=kept")
    assert sum("marker=abort" in line for line in lines) == 2


@needs_filelog
@pytest.mark.parametrize("serdes", [[], ["--set", "streams.inter.samza.key.serde=string",
                                        "--set", "streams.inter.samza.msg.serde=string"]],
                         ids=["bytes", "string"])
def test_produce_to_an_intermediate_stream_writes_user_messages_a_job_reads_as_messages(
        capsys, monkeypatch, root, serdes):
    from weir.engine.model import EnvelopeKind, SystemStream, SystemStreamPartition
    from weir.engine.systems.registry import SystemRegistry
    from weir.stores.config import Config

    sets = ["--set", "streams.inter.samza.system=filelog",
            "--set", "streams.inter.samza.intermediate=true", *serdes]
    run(capsys, "create", "inter", "--partitions", "1", "--root", root)
    code, out, _ = run(capsys, "produce", "inter", "--format", "kv", "--root", root, *sets,
                       stdin="ann=1\nbob=2\n", monkeypatch=monkeypatch)
    assert code == 0 and out.startswith("produced 2 record(s) to filelog.inter")
    # What a job reading the intermediate stream sees: user messages (the type byte in front),
    # not control records it cannot decode.
    config = Config({"systems.filelog.root": root, "streams.inter.samza.system": "filelog",
                     "streams.inter.samza.intermediate": "true",
                     **dict(s.split("=", 1) for s in serdes[1::2])})
    registry = SystemRegistry(config)
    ssp = SystemStreamPartition("filelog", "inter", 0)
    consumer = registry.consumer("filelog")
    consumer.register(ssp, 0)
    consumer.start()
    try:
        raw = consumer.poll([ssp], 1.0)[ssp]
    finally:
        consumer.stop()
    envelopes = [registry.serdes_for(SystemStream("filelog", "inter")).deserialize(e)
                 for e in raw]
    assert [e.kind for e in envelopes] == [EnvelopeKind.MESSAGE, EnvelopeKind.MESSAGE]
    assert [e.message for e in envelopes] == ([b"1", b"2"] if not serdes else ["1", "2"])


def test_a_user_serde_beside_the_config_is_found_from_any_directory(capsys, monkeypatch,
                                                                    tmp_path):
    """``--config`` puts the config's directory on the import path, as ``weir run`` does."""
    job = tmp_path / "job"
    job.mkdir()
    module = f"upper_serde_{uuid.uuid4().hex[:8]}"
    (job / f"{module}.py").write_text(
        "from weir.stores.serdes import SerdeBase\n\n"
        "class Upper(SerdeBase):\n"
        "    def to_bytes(self, obj):\n        return obj.upper().encode()\n\n"
        "    def from_bytes(self, data):\n        return data.decode().lower()\n")
    system = f"mem{uuid.uuid4().hex[:8]}"
    (job / "job.properties").write_text(
        f"systems.{system}.factory=memory\n"
        f"serializers.registry.upper.class={module}:Upper\n"
        f"systems.{system}.streams.words.samza.msg.serde=upper\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(sys, "path", list(sys.path))     # the command's sys.path entry goes
    args = ["--config", str(job / "job.properties"), "--system", system]
    try:
        assert run(capsys, "create", "words", *args)[0] == 0
        code, out, err = run(capsys, "produce", "words", *args, stdin="hello\n",
                             monkeypatch=monkeypatch)
        assert code == 0, err
        assert records(run(capsys, "tail", "words", *args)[1])[0].endswith("value=hello")
    finally:
        reset_memory_systems(system)
        sys.modules.pop(module, None)
