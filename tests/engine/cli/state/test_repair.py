"""``weir state repair`` through engine.cli.main: its refusals and a store that needs nothing.
The repairs themselves run against damaged real jobs in tests/reliability."""

from __future__ import annotations

import pytest

from weir.engine.cli import main
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.engine.config.job import load_config

JOB = """\
job.name=repair-cli
task.class=tests.e2e._count_job:CountJob
task.inputs=filelog.words
systems.filelog.factory=filelog
systems.filelog.root={root}
systems.filelog.samza.key.serde=string
systems.filelog.samza.msg.serde=string
stores.counts.factory=rocksdb
stores.counts.key.serde=string
stores.counts.msg.serde=int64
stores.counts.changelog=filelog.counts-changelog
stores.plain.factory=rocksdb
stores.plain.key.serde=string
stores.plain.msg.serde=int64
job.logged.store.base.dir={base}/state
job.non-logged.store.base.dir={base}/state
task.checkpoint.path={base}/checkpoints
"""


@pytest.fixture
def job(tmp_path):
    path = tmp_path / "job.properties"
    path.write_text(JOB.format(root=tmp_path / "log", base=tmp_path))
    SystemRegistry(load_config(path)).admin("filelog").create_stream(StreamSpec("words", 2))
    return str(path)


def run(capsys, *args: str) -> tuple[int, str]:
    code = main(["state", "repair", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize("store, needle", [("nope", "logged stores: counts"),
                                           ("plain", "is not a logged store")])
def test_repair_refuses_a_store_without_a_changelog(job, capsys, store, needle):
    code, text = run(capsys, job, "--task", "Partition 0", "--store", store, "--keep-local")
    assert code == 2 and needle in text


def test_repair_refuses_a_task_the_job_does_not_have(job, capsys):
    code, text = run(capsys, job, "--task", "Partition 7", "--store", "counts",
                     "--accept-loss")
    assert code == 2 and "no task 'Partition 7'" in text and "Partition 1" in text


def test_repair_needs_exactly_one_choice(job):
    with pytest.raises(SystemExit):
        main(["state", "repair", job, "--task", "Partition 0", "--store", "counts"])


def test_a_store_whose_changelog_reaches_the_checkpoint_needs_no_repair(job, capsys):
    code, text = run(capsys, job, "--task", "Partition 0", "--store", "counts", "--keep-local")
    assert code == 0 and "needed no repair" in text, text
