"""How a run reads to someone porting a Samza job: the resume line of a reset stream, a
script without a main guard, one log format for the runner and its container processes."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from weir.engine.container.container import resume_line
from weir.engine.container.progress import SspPosition
from weir.engine.container.runner import ExitCode, run_job
from weir.engine.container.status import StatusMode
from weir.engine.model import SystemStreamPartition as SSP

from tests.engine.container.test_runner import config_of, produce, write_job

REPO = Path(__file__).resolve().parents[3]


def test_a_reset_stream_is_not_said_to_resume_from_its_checkpoint():
    words, codes = SSP("filelog", "words", 0), SSP("filelog", "codes", 0)
    line = resume_line("Partition 0", {words: SspPosition(52, 52), codes: SspPosition(0, 0)},
                       [], reset={codes})

    assert "filelog.words#0 at offset 52" in line
    assert "reset (samza.reset.offset, its checkpointed offset ignored): filelog.codes#0 " \
           "from offset 0" in line
    assert "filelog.codes#0 at offset 0" not in line


def test_a_script_calling_run_job_without_a_main_guard_is_told_to_add_one(tmp_path):
    write_job(tmp_path, **{"job.container.count": "2"})
    produce(tmp_path, ["a", "b"])
    script = tmp_path / "script.py"
    script.write_text("from weir.engine.config.job import load_config\n"
                      "from weir.engine.container.runner import run_job\n"
                      "from weir.engine.container.status import StatusMode\n"
                      "run_job(load_config('job.properties'), status=StatusMode.OFF)\n")

    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=180, env=dict(os.environ, PYTHONPATH=str(REPO)))

    assert 'Call run_job under `if __name__ == "__main__":`' in result.stderr
    assert "is locked by weir run" not in result.stderr  # not blamed on a second run


def test_container_processes_log_through_the_runner_in_its_format(tmp_path, caplog):
    write_job(tmp_path, **{"job.container.count": "2"})
    produce(tmp_path, ["a", "b", "c"])

    with caplog.at_level(logging.INFO):
        result = run_job(config_of(tmp_path), status=StatusMode.OFF)

    assert result.exit_code is ExitCode.OK
    relayed = [r for r in caplog.records if r.getMessage().startswith("[container 1] ")]
    assert relayed, "container 1's log records reached the runner's handlers"
    assert any("run loop stopped" in r.getMessage() for r in relayed)


def test_the_run_loops_summary_line_has_thousands_separators():
    from weir.engine.runloop.loop import RunSummary, StopReason
    line = str(RunSummary(StopReason.END_OF_STREAM, {"Partition 0": 1_234_567}, 2.0))
    assert "1,234,567 messages in 2.00 s (617,284 msg/s)" in line
