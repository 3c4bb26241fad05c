"""``weir state export`` / ``import`` of a store without a changelog: its local files are the
only copy, so the snapshot carries them and import writes them back."""

from __future__ import annotations

import json

from tests.reliability._input_job import InputJob, words
from weir.engine.cli import main
from weir.stores.serdes import Int64Serde

_CACHE = """\
stores.cache.factory=rocksdb
stores.cache.key.serde=string
stores.cache.msg.serde=int64
"""


def _cache_engine(base):
    from weir.engine.config.job import JobConfig, StoreBase, load_config
    from weir.engine.container.container import store_specs
    from weir.stores.builder import open_engine

    config = load_config(base / "job.properties")
    job = JobConfig.from_config(config)
    (spec,) = [s for s in store_specs(config, job) if s.name == "cache"]
    directory = job.base_dir(StoreBase.NON_LOGGED) / "cache" / "Partition_0"
    return open_engine(spec, directory, logged=False)


def test_export_and_import_carry_a_store_without_changelog_from_its_local_files(
        tmp_path, monkeypatch, capsys):
    job = InputJob(tmp_path, "rocksdb", extra=_CACHE)
    job.produce(words(40), stop=True)
    assert job.run().returncode == 0
    monkeypatch.chdir(tmp_path)  # job.data.dir=. is the job's directory
    engine = _cache_engine(tmp_path)  # what a task left in its store without changelog
    engine.put_all([(b"a", Int64Serde().to_bytes(1)), (b"b", Int64Serde().to_bytes(2))])
    engine.flush()
    engine.close()

    assert main(["state", "export", "job.properties", "--out", "job.weirsnap", "--json"]) == 0
    stores = json.loads(capsys.readouterr().out)["stores"]
    assert {"task": "Partition 0", "store": "cache", "records": 2, "from": "local"} in stores
    assert main(["checkpoint", "reset", "job.properties", "--yes"]) == 0
    capsys.readouterr()
    assert main(["state", "dump", "job.properties", "--store", "cache"]) == 0
    assert capsys.readouterr().out == ""  # moved aside by the reset

    assert main(["state", "import", "job.properties", "--in", "job.weirsnap"]) == 0
    capsys.readouterr()
    assert main(["state", "dump", "job.properties", "--store", "cache"]) == 0
    dumped = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert dumped == [{"task": "Partition 0", "key": "a", "value": 1},
                      {"task": "Partition 0", "key": "b", "value": 2}]
