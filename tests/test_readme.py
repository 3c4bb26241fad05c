"""The README's commands work as written: its job files are the ones in examples/word_count,
its word count runs and resets as it says, and .ci/run runs exactly its test command.

The README's kill -9 demos take ~40 s; set WEIR_README_DEMO=1 to run them verbatim too (the
behaviour they show is covered by tests/e2e/test_job_sigkill.py and
tests/e2e/test_exactly_once.py with real SIGKILLs).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
WORD_COUNT = REPO / "examples" / "word_count"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def _section(title: str) -> str:
    start = README.index(title)
    end = README.find("\n## ", start + 1)
    return README[start:end if end >= 0 else None]


def _bash_in(section: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", section, flags=re.S)


def _run(script: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_ci_runs_exactly_the_readme_test_command():
    two = _bash_in(_section("## Two commands"))
    assert len(two) == 2
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert two[1].strip() in ci.splitlines()


def test_the_readme_word_count_is_the_example_on_disk():
    task = (WORD_COUNT / "word_count.py").read_text(encoding="utf-8")
    (code,) = [b for b in _blocks("python") if "class WordCount" in b]
    body = task[task.index("from weir import"):]
    assert " ".join(code.split()) == " ".join(body.split())
    (props,) = _blocks("properties")
    assert props == (WORD_COUNT / "job.properties").read_text(encoding="utf-8")


@pytest.fixture
def checkout(tmp_path):
    """A copy of examples/word_count at the same place under a fresh directory."""
    shutil.copytree(WORD_COUNT, tmp_path / "examples" / "word_count",
                    ignore=shutil.ignore_patterns("weir-data", "__pycache__"))
    return tmp_path


def test_the_readme_word_count_runs_and_resets_as_written(checkout):
    run_it, reset = _bash_in(_section("## A task"))[:2]
    here = checkout / "examples" / "word_count"

    first = _run(run_it, checkout)

    assert first.returncode == 0, first.stdout + first.stderr
    assert "job 'word-count' ended (end-of-stream)" in first.stdout
    assert '"count":2,"word":"hello"' in first.stdout
    assert sorted(p.name for p in (here / "weir-data").iterdir()) == ["log", "word-count-1"]
    assert sorted(p.name for p in (here / "weir-data" / "word-count-1").iterdir()) == \
        ["checkpoints", "state"]

    second = _run(reset + "\nweir run job.properties\npython3 check_counts.py\n", here)

    assert second.returncode == 0, second.stdout + second.stderr
    assert "3 input messages, 3 counts emitted (0 emitted again" in second.stdout
    assert "nothing counted twice" in second.stdout


def test_the_readme_kill_demos_kill_only_after_the_job_reported_progress():
    for demo in (_bash_in(_section("## A task"))[2],
                 _bash_in(_section("### Exactly-once: the same kill"))[0]):
        lines = [line.strip() for line in demo.splitlines()]
        kill = next(i for i, line in enumerate(lines) if line.startswith("kill -9 $!"))
        assert lines[kill - 1].startswith('until grep -qE "[0-9]{3},[0-9]{3} msgs" run.log || '
                                          '! kill -0 $!; do sleep 0.2; done')
        assert "--status log" in demo and "2> run.log &" in demo
        assert "timeout -s KILL" not in demo


@pytest.mark.skipif(not os.environ.get("WEIR_README_DEMO"),
                    reason="the README's kill -9 demo takes ~20 s; set WEIR_README_DEMO=1")
def test_the_readme_kill_demo_shows_what_it_says(checkout):
    run_it, _, demo = _bash_in(_section("## A task"))[:3]
    here = checkout / "examples" / "word_count"
    assert _run(run_it, checkout).returncode == 0

    result = _run(demo, here)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "resumes from its checkpoint: filelog.words#0 at offset" in result.stderr
    assert "nothing counted twice" in result.stdout


@pytest.mark.skipif(not os.environ.get("WEIR_README_DEMO"),
                    reason="the README's exactly-once demo takes ~20 s; set WEIR_README_DEMO=1")
def test_the_readme_exactly_once_demo_shows_what_it_says(checkout):
    run_it = _bash_in(_section("## A task"))[0]
    (demo,) = _bash_in(_section("### Exactly-once: the same kill"))
    here = checkout / "examples" / "word_count"
    assert _run(run_it, checkout).returncode == 0

    result = _run(demo, here)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "of its previous run" in result.stderr
    assert "1,000,000 counts emitted (0 emitted again" in result.stdout
    assert "nothing counted twice" in result.stdout


def test_the_readme_application_commands_run_as_written(tmp_path):
    shutil.copytree(REPO / "examples" / "pageviews", tmp_path / "examples" / "pageviews",
                    ignore=shutil.ignore_patterns("weir-data", "__pycache__"))
    (block,) = _bash_in(_section("## An application"))
    script = "\n".join(line for line in block.splitlines()
                       if "--stage 1" not in line and "weir drain" not in line)

    result = _run(script, tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "stage" in result.stdout and "job 'pageviews' ended (end-of-stream)" in result.stdout
