"""Shared fixtures for every test package, and the check that tests leave nothing behind.

Every test cleans up after itself. To hold the suite to that, a session-wide fixture points
``tempfile`` (and ``TMPDIR`` for child processes) at a directory of its own for the whole run
(each pytest-xdist worker its own; the controller gathers what they found),
and at the end of the session reports, and fails the run on, anything left there or added to,
removed from or changed in the repository tree (caches excluded: ``.venv``, ``.git``,
``__pycache__``, ``.hypothesis``, ...). pytest's own ``tmp_path`` directories are made first,
in the real temporary directory, and pytest removes those of passing tests
(``tmp_path_retention_policy = "failed"`` in pyproject.toml).
"""

from __future__ import annotations

import os
import shutil
import multiprocessing.util
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile(
    "dev", max_examples=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile("ci" if os.environ.get("CI") else "dev")

REPO = Path(__file__).resolve().parents[1]
_CACHE_DIRS = frozenset({".git", ".venv", "__pycache__", ".hypothesis", ".pytest_cache",
                         ".benchmarks", "build", "dist"})
_LEAKS_KEY = pytest.StashKey[list]()


@pytest.fixture
def tmp_dir(tmp_path):
    """A fresh directory for one test's files."""
    return tmp_path


def repo_files(root: Path = REPO) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` (caches excluded) -> (size, mtime in ns)."""
    out: dict[str, tuple[int, int]] = {}
    for base, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _CACHE_DIRS and not d.endswith(".egg-info")]
        for name in names:
            path = os.path.join(base, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            out[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns)
    return out


def leaks(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]],
          temp_dir: Path) -> list[str]:
    """What the session left behind: temporary files and changes to the repository tree."""
    found = [f"left in the temporary directory: {p}{_peek(p)}" for p in sorted(temp_dir.iterdir())
             if not _fork_server_socket(p)]
    found += [f"added to the repository: {p}" for p in sorted(after.keys() - before.keys())]
    found += [f"removed from the repository: {p}" for p in sorted(before.keys() - after.keys())]
    found += [f"changed in the repository: {p}" for p in sorted(before.keys() & after.keys())
              if before[p] != after[p]]
    return found


def _fork_server_socket(path: Path) -> bool:
    """A ``multiprocessing`` directory holding only the socket of a container fork server
    whose ``weir run`` a test killed with SIGKILL: nothing can remove it (the same is left in
    a real TMPDIR by any killed program that used a fork server)."""
    if not path.name.startswith("pymp-") or not path.is_dir():
        return False
    entries = list(path.iterdir())
    return all(e.name.startswith("listener-") and e.is_socket() for e in entries)


def _peek(path: Path) -> str:
    """A few names inside a leftover directory, to tell which test made it."""
    if not path.is_dir() or path.is_symlink():
        return ""
    names = sorted(str(p.relative_to(path)) for p in path.rglob("*"))
    more = f", ... ({len(names)} entries)" if len(names) > 5 else ""
    return f" (holding {', '.join(names[:5])}{more})" if names else " (empty)"


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind(request, tmp_path_factory):
    """Run the session with its own temporary directory; record what it leaves (see the
    module docstring). The report and the failure come from ``pytest_sessionfinish``."""
    tmp_path_factory.getbasetemp()  # pytest's tmp_path root stays in the real temp directory
    # multiprocessing's own directory (the container fork server's socket) stays there too:
    # it is removed when the interpreter exits, after this fixture.
    multiprocessing.util.get_temp_dir()
    temp_dir = Path(tempfile.mkdtemp(prefix="weir-tests-"))
    before = repo_files()
    saved_tempdir, saved_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = str(temp_dir)
    os.environ["TMPDIR"] = str(temp_dir)
    try:
        yield temp_dir
    finally:
        tempfile.tempdir = saved_tempdir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        request.session.stash[_LEAKS_KEY] = leaks(before, repo_files(), temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist, in the controller: what a worker's session left behind (each worker runs
    the session fixture with its own temporary directory and reports through its output)."""
    found = node.workeroutput.get("weir_leaks", [])
    node.config.stash.setdefault(_LEAKS_KEY, []).extend(found)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    found = session.stash.get(_LEAKS_KEY, []) + session.config.stash.get(_LEAKS_KEY, [])
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:        # an xdist worker: the controller reports and fails
        workeroutput["weir_leaks"] = found
        return
    if not found:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["tests left files behind (every test must clean up after itself: use tmp_path):",
             *(f"  {line}" for line in found[:50])]
    if len(found) > 50:
        lines.append(f"  ... and {len(found) - 50} more")
    if reporter is not None:
        reporter.write_sep("=", "files left behind", red=True, bold=True)
        for line in lines:
            reporter.write_line(line, red=True)
    else:
        print("\n".join(lines))
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
