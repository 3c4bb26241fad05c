"""``weir run`` of a task job, as a whole process: it imports what the job uses and nothing
else (no CLI of other commands, no HTTP server or client, no planner, no Spark, no asyncio or
YAML, no ``multiprocessing`` for one container in this process, no exactly-once or memory
system when the job does not use them, no optional third-party library)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from weir.engine.app.planner import APP_CLASS
from weir.engine.cli import run as run_cli
from weir.engine.config.job import load_config

from tests.engine.coordinator._helpers import create_inputs, produce, words, write_job

REPO = Path(__file__).resolve().parents[3]
OPTIONAL = ("pyspark", "py4j", "uvicorn", "starlette", "fastapi", "h11", "httpx", "fsspec",
            "boto3", "botocore", "s3fs", "hypothesis", "pytest", "bytewax", "quixstreams",
            "yaml", "lmdb", "pandas", "pyarrow", "numpy")
"""Third-party modules no start-up of a plain job imports (optional extras, test tools)."""
NEVER = (*OPTIONAL, "asyncio", "urllib.request", "multiprocessing", "concurrent.futures.process",
         "weir.engine.app", "weir.engine.spark", "weir.engine.cli.state", "weir.engine.cli.log",
         "weir.engine.coordinator.server", "weir.engine.coordinator.client",
         "weir.engine.systems.memory", "weir.engine.control.sender", "weir.engine.control.serde",
         "weir.engine.systems.filelog.transactions")


def _imported_by(code: str) -> set[str]:
    """The modules a new interpreter holds after running ``code``."""
    done = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\nprint(*sys.modules)"],
                          capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def _matching(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


def test_importing_the_command_line_imports_no_runner_and_no_optional_library():
    imported = _imported_by("import weir.engine.cli")

    assert _matching(imported, (*NEVER, "weir.engine.container", "weir.engine.coordinator",
                                "weir.engine.cli.run", "weir.stores.engines.rocksdb",
                                "weir.recovery.storage")) == []


def test_weir_run_of_a_task_job_imports_nothing_it_does_not_use(tmp_path):
    path = write_job(tmp_path, **{"task.class": "tests.engine._jobs:ModulesAtFirstMessage",
                                  "job.container.count": "1"})
    config = load_config(path)
    create_inputs(config, 2)
    produce(config, words(10), 2, end=True)
    modules = tmp_path / "modules.txt"
    env = dict(os.environ, WEIR_TEST_MODULES=str(modules),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))

    done = subprocess.run([sys.executable, "-m", "weir", "run", str(path), "--status", "off"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    imported = set(modules.read_text().split())
    assert "weir.engine.container.runner" in imported
    assert _matching(imported, NEVER) == []


def test_weir_run_looks_for_the_application_key_the_planner_reads():
    assert run_cli._APP_CLASS == APP_CLASS.name and not APP_CLASS.default
    assert not run_cli._names_application({"task.class": "a:B"})
    assert not run_cli._names_application({"app.class": ""})
