"""What a new user meets first on the command line: exit codes, help wording, closed pipes,
the config path as the first argument everywhere, Ctrl-C summaries."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from weir.engine.cli import build_parser, main

REPO = Path(__file__).resolve().parents[3]


def weir(*args: str, stdin: str | None = None, env: dict | None = None, shell: str | None = None,
         cwd: Path | None = None) -> subprocess.CompletedProcess:
    environ = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    command = shell or [sys.executable, "-m", "weir", *args]
    return subprocess.run(command, input=stdin, text=True, capture_output=True, env=environ,
                          shell=shell is not None, cwd=cwd, timeout=120)


def test_weir_without_a_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


def test_the_run_help_says_it_runs_applications_and_on_spark_too():
    text = build_parser().format_help()
    assert "run a job or an application" in text and "--runner spark" in text


def test_reset_state_help_says_the_state_is_set_aside_not_deleted(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "setting the job's state aside" in out and "never deleted" in out
    assert "by deleting the job's state" not in out


def test_output_into_a_closed_pipe_ends_quietly():
    result = weir(shell=f"{sys.executable} -m weir config docs --output - | head -1")
    assert result.returncode == 0
    assert result.stdout.startswith("# Weir configuration")
    assert "BrokenPipeError" not in result.stderr and "Traceback" not in result.stderr


def test_weir_config_docs_needs_no_pyspark():
    blocked = ("import sys; sys.modules['pyspark'] = None; sys.modules['py4j'] = None\n"
               "from weir.engine.cli import main\n"
               "sys.exit(main(['config', 'docs', '--output', '-']))")
    result = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (REPO / "docs" / "CONFIG.md").read_text(encoding="utf-8")


def test_weir_coordinator_takes_the_config_first_and_job_still_works_with_a_warning(
        tmp_path, capsys):
    config = tmp_path / "job.properties"
    config.write_text(f"job.name=never-ran\ntask.inputs=filelog.words\n"
                      f"systems.filelog.root={tmp_path / 'log'}\n")

    assert main(["coordinator", "show", str(config)]) == 2
    first = capsys.readouterr()
    assert main(["coordinator", "show", "--job", str(config)]) == 2
    second = capsys.readouterr()

    assert "has no coordinator stream" in first.err and "deprecated" not in first.err
    assert "--job is deprecated" in second.err and "has no coordinator stream" in second.err


class _TypedThenCtrlC:
    """Standard input that gives some lines, then the Ctrl-C of whoever typed them."""

    def __init__(self, text: str):
        self.lines = text.splitlines(keepends=True)

    def isatty(self) -> bool:
        return False

    def __iter__(self):
        yield from self.lines
        raise KeyboardInterrupt


def test_weir_log_produce_stopped_by_ctrl_c_says_what_it_wrote(tmp_path, capsys, monkeypatch):
    from weir.engine.cli.log.produce import produce_records
    root = str(tmp_path / "log")
    assert main(["log", "create", "words", "--partitions", "2", "--root", root]) == 0
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdin", _TypedThenCtrlC("a\nb\nc\n"))
    args = build_parser("log").parse_args(["log", "produce", "words", "--root", root])
    code = produce_records(args)

    err = capsys.readouterr().err
    assert code == 130
    assert "interrupted: produced 3 record(s) to filelog.words" in err
    assert "the stream was not ended" in err
    assert main(["log", "describe", "words", "--root", root]) == 0
    assert "3" in capsys.readouterr().out


def test_app_class_naming_a_task_says_to_use_task_class(tmp_path, capsys):
    config = tmp_path / "job.properties"
    config.write_text("job.name=j\napp.class=tests.engine._jobs:PassThrough\n")
    for command in (["run", str(config)], ["config", "show", str(config)]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "a task (it has process()), not an application" in err
        assert "task.class" in err
