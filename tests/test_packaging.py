"""Weir installs as one namespace, ``weir``, and its packages import in one direction.

The source folders ``stores/``, ``recovery/`` and ``engine/`` sit at the repository root and
install as ``weir.stores``, ``weir.recovery`` and ``weir.engine``: nothing generic named
``engine``, ``stores`` or ``recovery`` may land in site-packages, and no code may import them
by those bare names (run from the repository root it would work by accident and load a
second copy of every module).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = {"weir": "weir", "weir.stores": "stores", "weir.recovery": "recovery",
           "weir.engine": "engine"}
BARE = ("engine", "stores", "recovery")
PY_DIRS = ("weir", "stores", "recovery", "engine", "tests", "bench", "examples")


def _python_files():
    for top in PY_DIRS:
        for path in sorted((REPO / top).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path


def _imported_modules(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the sources (the build leaves nothing in the repo)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for folder in SOURCES.values():
        shutil.copytree(REPO / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out),
                    str(src)], check=True, capture_output=True, text=True)
    (built,) = out.glob("weir-*.whl")
    return built


def test_the_wheel_installs_only_the_weir_namespace(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"weir"}
    for bare in BARE:
        assert not any(n.startswith(f"{bare}/") for n in names), bare


def test_every_source_package_is_in_the_wheel(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = []
    for namespace, folder in SOURCES.items():
        for init in sorted((REPO / folder).rglob("__init__.py")):
            rel = init.relative_to(REPO / folder).as_posix()
            inside = namespace.replace(".", "/") + "/" + rel
            if inside not in names:
                missing.append(f"{init.relative_to(REPO)} -> {inside}")
    assert not missing, ("packages missing from the wheel; add them to [tool.setuptools] "
                         f"packages in pyproject.toml: {missing}")


def test_the_installed_wheel_imports_and_runs_the_weir_command(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, capture_output=True, text=True)
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = ("import weir, weir.engine.cli, weir.recovery, weir.stores; "
            "from weir import StreamTask, InitableTask, OutgoingMessageEnvelope; "
            "print(weir.__file__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True,
                         capture_output=True, text=True).stdout
    assert out.strip().startswith(str(target))
    version = subprocess.run([sys.executable, "-m", "weir", "--version"], cwd=tmp_path,
                             env=env, check=True, capture_output=True, text=True).stdout
    assert "0.1.0" in version
    for bare in BARE:
        probe = subprocess.run([sys.executable, "-c", f"import {bare}"], cwd=tmp_path, env=env,
                               capture_output=True, text=True)
        assert probe.returncode != 0, f"'import {bare}' works after installing the wheel"


def test_no_code_imports_the_bare_package_names():
    offenders = [f"{path.relative_to(REPO)}:{line}: {mod}"
                 for path in _python_files() for line, mod in _imported_modules(path)
                 if mod.split(".")[0] in BARE]
    assert not offenders, "import weir.<package> instead:\n" + "\n".join(offenders)


def test_no_code_runs_the_bare_packages_as_modules():
    """``python -m engine`` works from the repository root by accident (and loads a second copy
    of every module); the command is ``python -m weir`` (or the ``weir`` script)."""
    pattern = re.compile(r"""["']-m["'],\s*["'](engine|stores|recovery)\b|-m (engine|stores|recovery)\b""")
    offenders = [f"{path.relative_to(REPO)}:{n}: {line.strip()}"
                 for path in list(_python_files()) + sorted((REPO / "docs").glob("*.md"))
                 + [REPO / "README.md"]
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if pattern.search(line) and path != Path(__file__).resolve()]
    assert not offenders, "run `python -m weir` instead:\n" + "\n".join(offenders)


@pytest.mark.parametrize("package, forbidden", [
    ("stores", ("weir.recovery", "weir.engine")),
    ("recovery", ("weir.engine",)),
])
def test_imports_flow_one_way_engine_recovery_stores(package, forbidden):
    offenders = []
    for path in sorted((REPO / package).rglob("*.py")):
        for line, mod in _imported_modules(path):
            if any(mod == f or mod.startswith(f + ".") for f in forbidden):
                offenders.append(f"{path.relative_to(REPO)}:{line}: {mod}")
    assert not offenders, "imports flow engine -> recovery -> stores only:\n" + "\n".join(offenders)


def test_the_weir_package_re_exports_what_a_task_author_needs():
    import weir

    for name in ("StreamTask", "AsyncStreamTask", "InitableTask", "WindowableTask",
                 "ClosableTask", "EndOfStreamListenerTask", "OutgoingMessageEnvelope",
                 "IncomingMessageEnvelope", "SystemStream", "SystemStreamPartition",
                 "TaskContext", "TaskCoordinator", "MessageCollector", "KeyValueStore",
                 "run_job", "load_config"):
        assert getattr(weir, name) is not None, name
    assert set(weir.__all__) >= {"StreamTask", "run_job"}


def test_the_weir_facade_re_exports_the_public_api_of_every_package():
    import weir
    import weir.engine
    import weir.recovery
    import weir.stores

    packages = (weir.engine, weir.recovery, weir.stores)
    assert set(weir.__all__) == {"__version__"}.union(*(p.__all__ for p in packages))
    for package in packages:
        for name in package.__all__:
            assert getattr(weir, name) is getattr(package, name), f"{package.__name__}.{name}"


def test_the_engine_exports_every_task_interface_the_facade_does():
    from weir.engine import DrainListenerTask, WatermarkListenerTask  # noqa: F401


def test_every_name_in_every_packages_all_resolves():
    """Packages re-export lazily (a module ``__getattr__``): each name they declare in
    ``__all__`` must still import, from every package and module of the three."""
    import importlib
    import pkgutil

    unresolved = []
    for root in ("weir", "weir.stores", "weir.recovery", "weir.engine"):
        package = importlib.import_module(root)
        names = [root] if root == "weir" else [root, *(
            m.name for m in pkgutil.walk_packages(package.__path__, root + ".") if m.ispkg)]
        for name in names:
            module = importlib.import_module(name)
            unresolved += [f"{name}.{attr}" for attr in getattr(module, "__all__", ())
                           if not hasattr(module, attr)]
    assert unresolved == []


NO_ALL = {"engine/config/_declared_keys.py",   # generated data (weir config docs), no API
          "weir/__main__.py"}                   # `python -m weir`, an entry point


def _module_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def test_every_module_declares_all_and_each_name_in_it_exists():
    missing, unbound = [], []
    for top in ("weir", "stores", "recovery", "engine"):
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if "__pycache__" in path.parts or rel in NO_ALL:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), rel)
            declared = [node.value for node in tree.body
                        if isinstance(node, (ast.Assign, ast.AnnAssign))
                        and any(isinstance(t, ast.Name) and t.id == "__all__"
                                for t in (node.targets if isinstance(node, ast.Assign)
                                          else [node.target]))]
            if not declared:
                missing.append(rel)
                continue
            if "__getattr__" in _module_level_names(tree):
                continue   # a package that re-exports lazily: its names resolve on access
            try:
                names = ast.literal_eval(declared[0])
            except ValueError:
                continue   # built from other lists (the facade): checked by the tests above
            bound = _module_level_names(tree)
            unbound += [f"{rel}: {name}" for name in names if name not in bound]
    assert missing == [], "modules without __all__ (style: __all__ in each module)"
    assert unbound == [], "names in __all__ that the module does not define or import"
