"""The session check of tests/conftest.py: what counts as left behind."""

from __future__ import annotations

import os

from tests.conftest import leaks, repo_files


def test_added_removed_and_changed_files_and_temp_leftovers_are_reported(tmp_path):
    repo, temp = tmp_path / "repo", tmp_path / "temp"
    (repo / "pkg").mkdir(parents=True)
    temp.mkdir()
    (repo / "pkg" / "kept.py").write_text("a")
    (repo / "pkg" / "gone.py").write_text("b")
    (repo / "pkg" / "edited.py").write_text("c")
    before = repo_files(repo)

    (repo / "pkg" / "gone.py").unlink()
    (repo / "pkg" / "edited.py").write_text("cc")
    (repo / "stray.log").write_text("x")
    (temp / "tmpabc").mkdir()

    assert leaks(before, repo_files(repo), temp) == [
        f"left in the temporary directory: {temp / 'tmpabc'} (empty)",
        "added to the repository: stray.log",
        f"removed from the repository: {os.path.join('pkg', 'gone.py')}",
        f"changed in the repository: {os.path.join('pkg', 'edited.py')}"]


def test_caches_are_not_leaks(tmp_path):
    before = repo_files(tmp_path)
    for cache in (".hypothesis", "__pycache__", ".venv", "weir.egg-info"):
        (tmp_path / cache).mkdir()
        (tmp_path / cache / "f").write_text("x")
    assert leaks(before, repo_files(tmp_path), tmp_path / ".venv") == [
        f"left in the temporary directory: {tmp_path / '.venv' / 'f'}"]
