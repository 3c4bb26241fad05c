"""How container processes start: from the fork server by default, or spawned; either way
with the runner's environment as of the start."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from weir.engine.container.runner import ExitCode, run_job
from weir.engine.container.starter import StartMethod, warm_up
from weir.engine.container.status import StatusMode
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config
from weir.stores.errors import ConfigError

from tests.engine.container.test_container import emitted_counts, words
from tests.engine.container.test_runner import config_of, produce, write_job


def test_the_fork_server_is_the_default_start_method():
    assert StartMethod.from_config(Config({})) is StartMethod.FORKSERVER


def test_a_misspelled_start_method_is_a_config_error_naming_the_key(tmp_path):
    write_job(tmp_path, **{"job.container.start.method": "fork-server"})
    with pytest.raises(ConfigError, match="job.container.start.method"):
        run_job(config_of(tmp_path), status=StatusMode.OFF)


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_containers_see_the_runners_environment_as_of_their_start(tmp_path, monkeypatch,
                                                                  method):
    write_job(tmp_path, task="EnvProbe", **{"job.container.count": "2",
                                            "job.container.start.method": method})
    config = config_of(tmp_path)
    warm_up(config)  # a fork server started before the variable below was set
    probe = tmp_path / "probe"
    probe.mkdir()
    monkeypatch.setenv("WEIR_PROBE_DIR", str(probe))
    monkeypatch.setenv("WEIR_PROBE_MARK", "set-after-the-server-started")
    items = words(200)
    produce(tmp_path, items)

    result = run_job(config, status=StatusMode.OFF)

    assert result.exit_code is ExitCode.OK, result
    assert emitted_counts(SystemRegistry(config), "filelog") == Counter(items)
    seen = {p.name: p.read_text().split() for p in probe.iterdir()}
    assert len(seen) == 2  # both tasks, one per container
    assert {mark for mark, _, _ in seen.values()} == {"set-after-the-server-started"}
    pids = {pid for _, pid, _ in seen.values()}
    parents = {ppid for _, _, ppid in seen.values()}
    assert len(pids) == 2 and str(os.getpid()) not in pids
    if method == "spawn":
        assert parents == {str(os.getpid())}
    else:  # forked from the fork server, not from the runner
        assert len(parents) == 1 and parents != {str(os.getpid())}


def test_the_starter_imports_without_the_runner_or_the_container():
    # `weir run` starts the fork server before it imports the runner, so that the server's
    # imports overlap the runner's: importing the starter must not import them itself.
    import subprocess
    import sys

    code = ("import sys, weir.engine.container.starter\n"
            "print(' '.join(m for m in ('weir.engine.container.runner',\n"
            "                           'weir.engine.container.container',\n"
            "                           'weir.engine.coordinator.coordinator') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
