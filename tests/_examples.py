"""The examples' ``run_example.py`` modules, loaded for tests.

Each is loaded under its own module name (``<example>_run_example``): every example's module is
called ``run_example``, and a second one imported under that name would replace the first for
tests that already hold it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

__all__ = ["EXAMPLES", "load_example"]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str) -> ModuleType:
    """``examples/<name>/run_example.py`` as a fresh module."""
    spec = importlib.util.spec_from_file_location(f"{name}_run_example",
                                                  EXAMPLES / name / "run_example.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
