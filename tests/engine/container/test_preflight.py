"""A job that cannot run as configured is refused before anything is created.

Every settings object a container builds (run loop, stores and their serdes, chooser,
systems, stream serdes, offsets) is built from config before the first changelog stream,
store directory or checkpoint exists, and a directory the job must write that is read-only
ends ``weir run`` with exit code 2 and a typed error naming the directory and the config key
that chose it -- never a raw traceback. Real ``weir run`` processes on real files; the files
under the job's directory are listed before and after each refusal.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("weir.engine.systems.filelog", reason="the file log system is not built yet")

from weir.engine.container.container import Container  # noqa: E402
from weir.engine.container.preflight import unwritable_reason  # noqa: E402
from weir.engine.container.runner import prepare_job, run_job  # noqa: E402
from weir.engine.container.status import StatusMode  # noqa: E402
from weir.engine.errors import UnwritableDirectoryError  # noqa: E402
from weir.stores.errors import ConfigError  # noqa: E402

from tests.engine.container.test_runner import config_of, produce, write_job  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
WEIR = [sys.executable, "-m", "weir"]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _weir_run(tmp_path: Path, preexec=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([*WEIR, "run", "job.properties", "--status", "off"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60,
                          preexec_fn=preexec)


# -- bad settings: refused before anything is created --------------------------------------

def test_weir_run_refuses_concurrency_zero_before_any_changelog_or_checkpoint_exists(tmp_path):
    write_job(tmp_path, **{"task.max.concurrency": "0"})
    produce(tmp_path, ["a", "b"])
    before = _tree(tmp_path)
    done = _weir_run(tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "config key 'task.max.concurrency' (set at " in done.stderr
    assert "must be >= 1, got 0" in done.stderr
    assert "Traceback" not in done.stderr
    assert _tree(tmp_path) == before          # no changelog stream, no state, no checkpoint


@pytest.mark.parametrize("key,value,message", [
    ("task.max.concurrency", "0", "must be >= 1"),
    ("job.container.thread.pool.size", "-1", "must be >= 0"),
    ("task.shutdown.ms", "-1", "must be >= 0"),
    ("task.shutdown.ms", "-5", "expected an integer from -1 to"),
    ("task.max.idle.ms", "0", "must be >= 1"),
    ("stores.counts.key.serde", "no-such-serde", "unknown serde 'no-such-serde'"),
    ("systems.filelog.streams.counts-out.samza.msg.serde", "nope", "unknown serde 'nope'"),
    ("systems.filelog.streams.words.samza.offset.default", "bogus",
     "expected one of oldest, newest, upcoming"),
    ("task.chooser.class", "no_such_module:Chooser", "cannot load chooser class"),
    ("systems.filelog.streams.words.samza.priority", "high", "expected an integer"),
])
def test_every_setting_is_checked_before_anything_is_created(tmp_path, key, value, message):
    write_job(tmp_path, **{key: value})
    produce(tmp_path, ["a", "b"])
    before = _tree(tmp_path)
    with pytest.raises(ConfigError, match=message) as info:
        run_job(config_of(tmp_path), status=StatusMode.OFF)
    assert key in str(info.value)
    assert _tree(tmp_path) == before


def test_a_container_started_on_its_own_checks_before_it_creates_anything(tmp_path):
    write_job(tmp_path)
    produce(tmp_path, ["a", "b"])
    good = config_of(tmp_path)
    _, registry, model = prepare_job(good)            # creates the changelog stream
    before = _tree(tmp_path)
    bad = config_of(tmp_path, **{"task.max.concurrency": "0"})
    with pytest.raises(ConfigError, match="task.max.concurrency"):
        Container(bad, model, "0").run()
    assert _tree(tmp_path) == before                  # no store directory, no checkpoint


# -- directories the job cannot write -------------------------------------------------------

def _without_root_powers():
    """For ``preexec_fn``: as root, drop the capabilities that bypass file permissions
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) from the bounding set, so the child, after exec,
    meets permission bits like any user. Nothing to do for other users."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):                              # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:       # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _can_drop_root_powers() -> bool:
    if os.geteuid() != 0:
        return True
    if not sys.platform.startswith("linux"):
        return False
    probe = subprocess.run([sys.executable, "-c", "pass"], preexec_fn=_without_root_powers,
                           capture_output=True)
    return probe.returncode == 0


needs_permissions = pytest.mark.skipif(not _can_drop_root_powers(),
                                       reason="cannot run a child without root's file powers")


def _read_only(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)


def _writable_again(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)


@needs_permissions
@pytest.mark.parametrize("read_only,key,directory", [
    ("job", "job.data.dir", "job"),
    ("log", "systems.filelog.root", "log"),
    ("state-parent", "job.logged.store.base.dir", "state-parent/state"),
])
def test_a_fresh_job_in_a_read_only_directory_ends_with_a_typed_error_naming_it(
        tmp_path, read_only, key, directory):
    job = tmp_path / "job"
    job.mkdir()
    extra = {}
    if read_only != "job":
        (tmp_path / "checkpoints").mkdir()
        (job / "state-parent").mkdir()
        extra = {"task.checkpoint.path": str(tmp_path / "checkpoints"),
                 "job.logged.store.base.dir": "state-parent/state"}
    write_job(job, **extra)
    produce(job, ["a", "b"])
    target = {"job": job, "log": job / "log", "state-parent": job / "state-parent"}[read_only]
    before = _tree(tmp_path)
    _read_only(target)
    try:
        done = _weir_run(job, preexec=_without_root_powers)
    finally:
        _writable_again(target)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"config key '{key}'" in done.stderr
    assert str(job / directory) in done.stderr
    assert "permission denied (EACCES)" in done.stderr
    assert "nothing was created" in done.stderr
    assert _tree(tmp_path) == before


def test_unwritable_reason_names_a_file_in_the_way_and_accepts_a_writable_tree(tmp_path):
    (tmp_path / "file").write_text("x")
    assert unwritable_reason(tmp_path / "file" / "checkpoints") == (
        f"{tmp_path / 'file'} is a file, not a directory")
    assert unwritable_reason(tmp_path / "new" / "deeper") is None
    assert not (tmp_path / "new").exists()


def test_the_unwritable_directory_error_is_a_config_error_with_the_path():
    err = UnwritableDirectoryError("x", path="/p", key="task.checkpoint.path", origin="j:3")
    assert isinstance(err, ConfigError)
    assert (err.path, err.key, err.origin) == ("/p", "task.checkpoint.path", "j:3")
    assert str(err).startswith("config key 'task.checkpoint.path' (set at j:3): ")


def test_prepare_job_refuses_bad_settings_before_it_looks_for_the_input_streams(tmp_path):
    """prepare_job checks settings before it reads partition counts or builds the model:
    a refused job does not even need its input streams to exist."""
    write_job(tmp_path, **{"task.max.concurrency": "0"})
    with pytest.raises(ConfigError, match="task.max.concurrency"):
        prepare_job(config_of(tmp_path))
