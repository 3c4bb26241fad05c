"""``weir config show`` and ``weir run`` make one check: what one refuses the other refuses,
what one accepts the other accepts."""

from __future__ import annotations

import pytest

from weir.engine.cli import main

SAMZA = """job.name=wikipedia-stats
job.data.dir={data}
task.class=tests.engine._jobs:CountWords
task.inputs=kafka.wikipedia-edits
systems.kafka.samza.factory=org.apache.samza.system.kafka.KafkaSystemFactory
systems.kafka.root={log}
systems.kafka.samza.msg.serde=string
systems.kafka.streams.metrics.samza.msg.serde=metrics
serializers.registry.metrics.class=org.apache.samza.serializers.MetricsSnapshotSerdeFactory
stores.counts.factory=org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory
stores.counts.key.serde=string
stores.counts.msg.serde=int64
stores.counts.changelog=kafka.counts-changelog
stores.counts.write.batch.size=0
stores.counts.object.cache.size=0
"""


def write(tmp_path, extra: str = ""):
    path = tmp_path / "job.properties"
    path.write_text(SAMZA.format(data=tmp_path / "data", log=tmp_path / "log") + extra)
    return str(path)


def test_what_weir_run_accepts_config_show_accepts_with_its_notes(tmp_path, capsys):
    assert main(["config", "show", write(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "0 warnings, 1 note" in out and "KafkaSystemFactory" in out


@pytest.mark.parametrize("extra,key", [
    ("task.max.concurrency=0\n", "task.max.concurrency"),
    ("task.class=tests.engine._jobs:NoSuchTask\n", "task.class"),
    ("serializers.registry.avro.class=com.example.AvroSerdeFactory\n"
     "systems.kafka.samza.key.serde=avro\n", "serializers.registry.avro.class"),
    ("metrics.reporters=graphite\nmetrics.reporter.graphite.class=com.example.Graphite\n",
     "metrics.reporter.graphite.class"),
])
def test_what_weir_run_refuses_config_show_refuses_naming_the_key(tmp_path, capsys, extra, key):
    path = write(tmp_path, extra)
    assert main(["config", "show", path]) == 2
    shown = capsys.readouterr().err
    assert main(["run", path, "--status", "off"]) == 2
    ran = capsys.readouterr().err
    assert key in shown and key in ran
    assert not (tmp_path / "data").exists()  # neither created anything
