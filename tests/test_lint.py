"""Lint with the tests: ``ruff check`` (pyflakes' rules: unused imports and variables,
undefined names, f-strings without placeholders, ...) passes over the product, the tests, the
benchmarks and the examples, and ``vulture`` finds no unreferenced function, method, class,
property, attribute or variable in the product. Both are in the ``test`` extra; ruff's rules are
in pyproject.toml.

vulture runs at ``--min-confidence 60``: that is the level of everything it reports about
unreferenced definitions (it gives 60% to all of them, 90% to unused imports and 100% to
unreachable code and unused arguments), so a higher threshold would find no unreferenced
method at all. It reads the tests, benchmarks and examples too, so code they use counts as
referenced, but only the product's findings fail the test. Uses it cannot see (names read from
config or JSON, framework callbacks, API documented for users) are in
tests/vulture_whitelist.py, each with its reason. About 8 s of CPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = ("stores", "engine", "recovery", "weir", "tests", "bench", "examples")
PRODUCT = ("stores/", "recovery/", "engine/")
VULTURE_WHITELIST = "tests/vulture_whitelist.py"


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


def _vulture(*paths: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vulture", "--min-confidence", "60", *paths],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def test_vulture_finds_no_unreferenced_code_in_the_product():
    result = _vulture(*CHECKED, VULTURE_WHITELIST)
    assert result.returncode in (0, 3), result.stderr  # 3: it found something
    found = [line for line in result.stdout.splitlines() if line.startswith(PRODUCT)]
    assert not found, ("unreferenced code in the product (nothing in the product, tests, "
                       "benchmarks or examples uses it): delete it, or, for a use vulture cannot "
                       f"see, add it to {VULTURE_WHITELIST} with the reason:\n  "
                       + "\n  ".join(found))


def test_vulture_reports_an_unreferenced_method(tmp_path):
    (tmp_path / "m.py").write_text(
        "class A:\n    def used(self):\n        return 1\n\n    def dead(self):\n"
        "        return 2\n\n\nprint(A().used())\n")
    result = _vulture("m.py", cwd=tmp_path)
    assert result.returncode == 3 and "unused method 'dead'" in result.stdout
    assert "'used'" not in result.stdout
