"""A reset of an exactly-once job (issue 23, point 9): the job's producer state moves aside
with its checkpoints, changelogs and stores, after the transactions a killed run left
unfinished were completed as its next start would have completed them."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from weir.engine.config.job import JobConfig
from weir.engine.container.state_reset import plan_state_reset
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.filelog.settings import IsolationLevel
from weir.engine.systems.filelog.transactions import TransactionalProducer
from weir.engine.systems.registry import SystemRegistry
from weir.recovery.errors import RecoveryError
from weir.stores.config import Config

ROOT = Path(__file__).resolve().parents[3]
TID = "eos-1/Partition 0"


def job_config(tmp_path: Path) -> Config:
    return Config({"job.name": "eos", "task.class": "tasks:Nothing",
                   "task.inputs": "fl.words", "systems.fl.factory": "filelog",
                   "systems.fl.root": str(tmp_path / "log"),
                   "job.data.dir": str(tmp_path / "data"),
                   "task.processing.guarantee": "exactly_once"})


def killed_in_a_transaction(tmp_path: Path, cfg: Config, *, checkpoint_names_it: bool) -> None:
    """A child process sends one record to ``fl.out`` in a transaction, prepares it (the
    checkpoint naming it when asked: the crash then came after the decision) and is
    SIGKILLed before any commit marker."""
    checkpoints = JobConfig.from_config(cfg).checkpoint_dir
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        from weir.stores.config import Config
        from weir.engine.model import OutgoingMessageEnvelope, SystemStream
        from weir.engine.systems.filelog import FileLogSettings
        from weir.engine.systems.filelog.transactions import TransactionalProducer
        from weir.recovery.checkpoint import Checkpoint, FileCheckpointManager
        settings = FileLogSettings.from_config("fl", Config({{
            "systems.fl.root": {str(tmp_path / "log")!r}}}))
        manager = FileCheckpointManager({str(checkpoints)!r})
        p = TransactionalProducer(settings, {TID!r})
        p.init_transactions()
        p.send("t", OutgoingMessageEnvelope(SystemStream("fl", "out"), b"v", key=b"k", partition=0))
        txn = p.prepare({{"kind": "weir-checkpoint", "task": "Partition 0",
                         "path": str(manager.path_for("Partition 0"))}})
        if {checkpoint_names_it!r}:
            manager.write("Partition 0", Checkpoint({{}}, {{}},
                                                     {{"transactions": [txn.to_extras()]}}))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", script], timeout=60)
    assert done.returncode == -signal.SIGKILL


def committed(registry: SystemRegistry, stream: str) -> list[bytes]:
    reader = registry.admin("fl").reader(stream, 0, 0, isolation=IsolationLevel.READ_COMMITTED)
    try:
        return [r.value for r in reader.read_records(100)]
    finally:
        reader.close()


@pytest.mark.parametrize("named, outputs", [(True, [b"v"]), (False, [])])
def test_a_reset_completes_a_killed_runs_transaction_then_moves_its_producer_aside(
        tmp_path, named, outputs):
    cfg = job_config(tmp_path)
    registry = SystemRegistry(cfg)
    registry.admin("fl").create_stream(StreamSpec("out", 1))
    killed_in_a_transaction(tmp_path, cfg, checkpoint_names_it=named)
    assert registry.admin("fl").open_transactions("out")[0][1]  # held back by it

    plan = plan_state_reset([cfg], registry, suffix="reset-T")
    kinds = [m.kind for m in plan.moves]
    assert kinds[0] == "transaction" and kinds[-1] == "producers"
    plan.run()

    # rolled forward when its checkpoint named it, aborted otherwise; nobody is held back
    assert committed(registry, "out") == outputs
    assert not registry.admin("fl").open_transactions("out")[0][1]
    log = tmp_path / "log"
    assert [p.name for p in (log / ".transactions.reset-T" / "ids").iterdir()] == [
        "eos-1%2FPartition%200"]
    assert not list((log / ".transactions" / "ids").iterdir())
    # the next incarnation of the task's producer starts as a new producer, nothing to redo
    fresh = TransactionalProducer(registry.admin("fl").settings, TID)
    result = fresh.init_transactions()
    fresh.stop()
    assert result.epoch == 0 and result.previous is None


def test_a_reset_refuses_while_a_producer_of_the_job_is_live(tmp_path):
    cfg = job_config(tmp_path)
    registry = SystemRegistry(cfg)
    live = TransactionalProducer(registry.admin("fl").settings, TID)
    live.init_transactions()
    try:
        with pytest.raises(RecoveryError, match=f"producer of '{TID}' on system 'fl' is live"):
            plan_state_reset([cfg], registry, suffix="reset-T")
    finally:
        live.stop()
    assert not (tmp_path / "log" / ".transactions.reset-T").exists()


def test_producers_of_other_jobs_stay_where_they_are(tmp_path):
    cfg = job_config(tmp_path)
    registry = SystemRegistry(cfg)
    for tid in (TID, "eos-10/Partition 0", "other-1/Partition 0"):
        producer = TransactionalProducer(registry.admin("fl").settings, tid)
        producer.init_transactions()
        producer.stop()
    plan_state_reset([cfg], registry, suffix="reset-T").run()
    left = sorted(p.name for p in (tmp_path / "log" / ".transactions" / "ids").iterdir())
    assert left == ["eos-10%2FPartition%200", "other-1%2FPartition%200"]
