"""No capability probes in product code (issue 25).

A seam declares its optional capabilities with defaults (docs/ARCHITECTURE.md, "Seams"); code
calls them. This test fails on ``getattr(<expr>, "<literal>", <default>)`` and on ``hasattr(...)``
anywhere in ``stores/``, ``recovery/`` and ``engine/`` outside :data:`ALLOWED`, a commented
allow-list keyed by ``(file, enclosing function, attribute)``. It also fails on an entry that no
longer matches anything, so the list only shrinks as probes are replaced.

Every entry is a genuine dynamic lookup on an object Weir does not define (a user class named
in config, adapted once where it is loaded; a user task's optional hooks; third-party exceptions
and objects; argparse namespaces and text streams), with its reason. Weir's own seams (changelogs,
engines, store serdes, the system SPI, stream serdes, envelope sources, choosers, the task
context, typed iterators) declare their capabilities with defaults and are called, never probed:
no entry may name one of them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("stores", "recovery", "engine")

# -- why an entry may stay --------------------------------------------------------------------
NAMING = "naming an arbitrary callable or object in a message"
DECLARED_TYPE = "the type given to declare(): a Python type or a parser class, its name and hook"
ANY_ITERATOR = "any Python iterator: a generator has close(), a list iterator does not"
FOREIGN_EXCEPTION = ("attributes some exceptions carry (PyYAML marks, urllib's reason, py4j's "
                     "desc, a system's or worker's offset/path/position): any exception arrives")
THIRD_PARTY = "PySpark / NumPy objects whose API differs between versions or row types"
ARGPARSE_AND_STREAMS = "an argparse namespace (per sub-command), any text stream, any default"
USER_CLASS_AT_THE_EDGE = ("a user class named in config (serde, chooser, application), checked "
                          "or adapted once where it is loaded")
USER_TASK_HOOKS = ("a user task's optional lifecycle hooks: as in Samza, a task may define "
                   "init/window/close/on_end_of_stream without the marker base class")

ALLOWED: dict[tuple[str, str, str], str] = {
    # -- USER_CLASS_AT_THE_EDGE
    ("engine/app/loader.py", "describe_application", "describe"): USER_CLASS_AT_THE_EDGE,
    ("engine/app/loader.py", "load_application", "describe"): USER_CLASS_AT_THE_EDGE,
    ("engine/chooser/spec.py", "_load_user_class", "hasattr:?"): USER_CLASS_AT_THE_EDGE,
    ("engine/container/preflight.py", "refuse_task_as_application", "describe"): USER_CLASS_AT_THE_EDGE,
    ("engine/systems/foreign.py", "_refuse_ignored_capabilities", "hasattr:?"): USER_CLASS_AT_THE_EDGE,
    ("stores/serdes.py", "_CheckedSerde.__init__", "name"): USER_CLASS_AT_THE_EDGE,
    ("stores/serdes.py", "_CheckedSerde.__init__", "prefix_safe"): USER_CLASS_AT_THE_EDGE,
    ("stores/serdes.py", "_load_user_serde", "from_bytes"): USER_CLASS_AT_THE_EDGE,
    ("stores/serdes.py", "_load_user_serde", "to_bytes"): USER_CLASS_AT_THE_EDGE,
    # -- ARGPARSE_AND_STREAMS
    ("engine/cli/__init__.py", "main", "func"): ARGPARSE_AND_STREAMS,
    ("engine/cli/_console.py", "console", "hasattr:isatty"): ARGPARSE_AND_STREAMS,
    ("engine/cli/config.py", "_default_text", "value"): ARGPARSE_AND_STREAMS,
    ("engine/cli/log/target.py", "existing_stream", "partition"): ARGPARSE_AND_STREAMS,
    # -- FOREIGN_EXCEPTION
    ("engine/config/files.py", "parse_yaml", "context"): FOREIGN_EXCEPTION,
    ("engine/config/files.py", "parse_yaml", "context_mark"): FOREIGN_EXCEPTION,
    ("engine/config/files.py", "parse_yaml", "problem"): FOREIGN_EXCEPTION,
    ("engine/config/files.py", "parse_yaml", "problem_mark"): FOREIGN_EXCEPTION,
    ("engine/coordinator/client.py", "CoordinatorClient._request", "reason"): FOREIGN_EXCEPTION,
    ("engine/coordinator/client.py", "_failure_of", "reason"): FOREIGN_EXCEPTION,
    ("engine/spark/jobrunner.py", "_failure", "desc"): FOREIGN_EXCEPTION,
    ("engine/spark/storage/s3.py", "_describe_error", "response"): FOREIGN_EXCEPTION,
    ("engine/spark/storage/s3.py", "_status", "response"): FOREIGN_EXCEPTION,
    ("recovery/_workers.py", "_changelog_error", "offset"): FOREIGN_EXCEPTION,
    ("recovery/_workers.py", "_changelog_error", "path"): FOREIGN_EXCEPTION,
    ("recovery/_workers.py", "_changelog_error", "position"): FOREIGN_EXCEPTION,
    ("recovery/store_restore.py", "ChangelogFailure.__init__", "exact"): FOREIGN_EXCEPTION,
    ("recovery/store_restore.py", "ChangelogFailure.__init__", "offset"): FOREIGN_EXCEPTION,
    ("recovery/store_restore.py", "ChangelogFailure.__init__", "path"): FOREIGN_EXCEPTION,
    ("recovery/store_restore.py", "ChangelogFailure.__init__", "position"): FOREIGN_EXCEPTION,
    # -- NAMING
    ("engine/container/stop_steps.py", "StopSteps.close_all", "__qualname__"): NAMING,
    ("engine/runloop/pool.py", "TaskPool._work", "__qualname__"): NAMING,
    ("engine/testing/runner.py", "TestRunner._name_of", "__name__"): NAMING,
    # -- THIRD_PARTY
    ("engine/spark/handover.py", "_Chunk.__init__", "kind"): THIRD_PARTY,
    ("engine/spark/metrics.py", "weir_metrics", "hasattr:asDict"): THIRD_PARTY,
    ("engine/spark/metrics.py", "weir_metrics", "observedMetrics"): THIRD_PARTY,
    ("engine/spark/operator.py", "StateOperator.apply", "hasattr:_parse_ddl"): THIRD_PARTY,
    ("engine/spark/transform.py", "_outputs_table", "hasattr:asDict"): THIRD_PARTY,
    ("engine/spark/transform.py", "_pre_init.parse", "hasattr:_parse_ddl"): THIRD_PARTY,
    # -- USER_TASK_HOOKS
    ("engine/task.py", "TaskWrapper.close", "close"): USER_TASK_HOOKS,
    ("engine/task.py", "TaskWrapper.init", "init"): USER_TASK_HOOKS,
    ("engine/task.py", "TaskWrapper.on_end_of_stream", "on_end_of_stream"): USER_TASK_HOOKS,
    ("engine/task.py", "TaskWrapper.window", "window"): USER_TASK_HOOKS,
    ("engine/task.py", "describe_task", "process_async"): USER_TASK_HOOKS,
    ("engine/testing/harness.py", "TestHarness.__init__", "window"): USER_TASK_HOOKS,
    ("engine/testing/harness.py", "TestHarness.close", "close"): USER_TASK_HOOKS,
    ("engine/testing/harness.py", "TestHarness.init", "init"): USER_TASK_HOOKS,
    ("engine/testing/harness.py", "TestHarness.on_end_of_stream", "on_end_of_stream"): USER_TASK_HOOKS,
    # -- ANY_ITERATOR
    ("stores/_iterators.py", "GeneratorIterator.close", "close"): ANY_ITERATOR,
    # -- DECLARED_TYPE
    ("stores/config.py", "ConfigKey.parse", "parse_value"): DECLARED_TYPE,
    ("stores/config.py", "ConfigKey.parse", "type_name"): DECLARED_TYPE,
    ("stores/config.py", "ConfigKey.type_name", "__name__"): DECLARED_TYPE,
    ("stores/config.py", "ConfigKey.type_name", "type_name"): DECLARED_TYPE,
}


def _probes(path: Path, root: Path = ROOT) -> list[tuple[str, str, str, int]]:
    """``(file, enclosing function, attribute, line)`` of every probe in ``path`` (``file``
    relative to ``root``); a ``hasattr`` is named ``hasattr:<attribute>``."""
    rel = path.relative_to(root).as_posix()
    found: list[tuple[str, str, str, int]] = []
    scope: list[str] = []

    class Visitor(ast.NodeVisitor):
        def generic_visit(self, node: ast.AST) -> None:
            named = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            if named:
                scope.append(node.name)  # type: ignore[attr-defined]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                literal = (node.args[1].value if len(node.args) > 1
                           and isinstance(node.args[1], ast.Constant)
                           and isinstance(node.args[1].value, str) else None)
                if node.func.id == "hasattr":
                    found.append((rel, ".".join(scope), f"hasattr:{literal or '?'}",
                                  node.lineno))
                elif node.func.id == "getattr" and len(node.args) == 3 and literal:
                    found.append((rel, ".".join(scope), literal, node.lineno))
            super().generic_visit(node)
            if named:
                scope.pop()

    Visitor().visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return found


def _all_probes() -> list[tuple[str, str, str, int]]:
    return [probe for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
            for probe in _probes(path)]


def test_product_code_has_no_capability_probes_outside_the_allow_list():
    unexpected = [f"{file}:{line} in {func or '<module>'}: {name}"
                  for file, func, name, line in _all_probes()
                  if (file, func, name) not in ALLOWED]
    assert not unexpected, (
        "capability probes (getattr with a literal name and a default, or hasattr) in product "
        "code; call a declared capability instead (docs/ARCHITECTURE.md, 'Seams'), or, for a "
        "genuine dynamic lookup, add a commented entry to ALLOWED:\n  " + "\n  ".join(unexpected))


def test_every_allow_list_entry_still_matches_a_probe():
    present = {(file, func, name) for file, func, name, _ in _all_probes()}
    stale = sorted(set(ALLOWED) - present)
    assert not stale, f"allow-list entries that match nothing any more (remove them): {stale}"


def test_the_lint_catches_both_kinds_of_probe_but_not_a_dynamic_name(tmp_path):
    package = tmp_path / "stores"
    package.mkdir()
    (package / "m.py").write_text(
        "def f(x):\n    a = getattr(x, 'bulk_reader', None)\n    b = hasattr(x, 'split')\n"
        "    c = getattr(x, name)\n    return a, b, c\n", encoding="utf-8")
    assert [p[:3] for p in _probes(package / "m.py", tmp_path)] == [
        ("stores/m.py", "f", "bulk_reader"), ("stores/m.py", "f", "hasattr:split")]
