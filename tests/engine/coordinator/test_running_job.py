"""Config written while a job runs (``weir coordinator set-config``): real container processes
move to the new job model, each committing first, and the job ends with exact state."""

from __future__ import annotations

import threading
import time
from collections import Counter

from weir.engine.cli import main as weir_main
from weir.engine.container.runner import ExitCode, run_job
from weir.engine.container.status import StatusMode
from weir.engine.coordinator import CoordinatorState, CoordinatorStreamStore

from tests.engine.coordinator._helpers import (create_inputs, emitted_counts, job_config, produce,
                                               words)

PARTITIONS = 4
FAST = {"task.commit.ms": "200", "job.coordinator.catchup.interval.ms": "100"}


def wait_for_locality(config, containers: set[str], timeout: float = 90.0) -> None:
    """Until every container in ``containers`` reported its host (it read its model)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with CoordinatorStreamStore.for_job(config, source="test") as store:
            store.bootstrap()
            if containers <= set(CoordinatorState.from_store(store).locality):
                return
        time.sleep(0.1)
    raise AssertionError(f"containers {containers} did not report their host in {timeout} s")


def run_in_thread(config) -> tuple[threading.Thread, dict]:
    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault(
        "result", run_job(config, status=StatusMode.OFF)), daemon=True)
    thread.start()
    return thread, box


def set_config(tmp_path, key: str, value: str) -> None:
    assert weir_main(["coordinator", "set-config", str(tmp_path / "job.properties"),
                      "--key", key, "--value", value]) == 0


def test_a_container_count_change_while_running_ends_with_exact_state(tmp_path):
    config = job_config(tmp_path, **{"job.container.count": "2", **FAST})
    create_inputs(config, PARTITIONS)
    first, second = words(600), words(600, first=600)
    produce(config, first, PARTITIONS)
    thread, box = run_in_thread(config)
    wait_for_locality(config, {"0", "1"})

    set_config(tmp_path, "job.container.count", "3")
    wait_for_locality(config, {"2"})
    produce(config, second, PARTITIONS, first=600, end=True)
    thread.join(timeout=120)

    result = box["result"]
    assert result.exit_code is ExitCode.OK, result.summary_lines()
    # Container 1 gave Partition 3 to the new container 2 (restarted); container 0 kept running.
    assert sorted(c.container_id for c in result.containers) == ["0", "1", "1", "2"]
    assert emitted_counts(config, PARTITIONS) == Counter(first + second)


def test_a_single_container_job_moves_to_container_processes_when_the_count_grows(tmp_path):
    config = job_config(tmp_path, **FAST, **{"job.container.count": "1"})
    create_inputs(config, PARTITIONS)
    first, second = words(400), words(400, first=400)
    produce(config, first, PARTITIONS)
    thread, box = run_in_thread(config)
    wait_for_locality(config, {"0"})

    set_config(tmp_path, "job.container.count", "2")
    wait_for_locality(config, {"1"})
    produce(config, second, PARTITIONS, first=400, end=True)
    thread.join(timeout=120)

    result = box["result"]
    assert result.exit_code is ExitCode.OK, result.summary_lines()
    assert sorted(c.container_id for c in result.containers) == ["0", "0", "1"]
    assert emitted_counts(config, PARTITIONS) == Counter(first + second)


def test_weir_run_refuses_a_changed_changelog_and_reset_state_rebuilds_exact_state(tmp_path, capsys):
    config = job_config(tmp_path)
    create_inputs(config, PARTITIONS)
    items = words(300)
    produce(config, items, PARTITIONS, end=True)
    path = str(tmp_path / "job.properties")
    assert weir_main(["run", path, "--status", "off"]) == 0
    assert emitted_counts(config, PARTITIONS) == Counter(items)
    changed = job_config(tmp_path, **{"stores.counts.changelog": "filelog.counts-log"})
    capsys.readouterr()

    assert weir_main(["run", path, "--status", "off"]) == 2
    err = capsys.readouterr().err
    assert "config key 'stores.counts.changelog'" in err and "--reset-state" in err

    assert weir_main(["run", path, "--status", "off", "--reset-state"]) == 0
    # Checkpoints and state were deleted: the input was read again from the oldest offset into
    # empty stores, so the counts sent at the end are exactly the input's, not doubled.
    assert emitted_counts(changed, PARTITIONS) == Counter(items)
    assert not (tmp_path / "log" / "counts-changelog").exists()
