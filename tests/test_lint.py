"""Lint with the tests: ``ruff check`` (pyflakes' rules: unused imports and variables,
undefined names, f-strings without placeholders, ...) passes over the product, the tests, the
benchmarks and the examples. ruff is in the ``test`` extra; its rules are in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = ("stores", "engine", "recovery", "weir", "tests", "bench", "examples")


def test_ruff_finds_nothing_in_the_product_and_the_tests():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                             "--output-format", "concise", *CHECKED], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (result.stdout + result.stderr
                                    + "\nfix these (or `ruff check --fix`)")


def test_ruff_reports_an_unused_import(tmp_path):
    (tmp_path / "bad.py").write_text("import os\n")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated",
                             "--select", "F", "bad.py"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1 and "F401" in result.stdout
