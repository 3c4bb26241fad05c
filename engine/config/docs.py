"""Generating ``docs/CONFIG.md`` from every ``declare(...)`` in the code.

Internal to :mod:`weir.engine.config.job`. Declarations are collected by importing every module of the
``stores``, ``recovery`` and ``engine`` packages; a module that fails to import stops the
generation with an error naming it (a skipped module would silently drop its keys).
``__main__`` modules are not imported: running them is their only effect.
"""

from __future__ import annotations

import importlib
import pkgutil
from enum import Enum
from typing import Any

from weir.stores.config import ConfigKey, declared_keys

from weir.engine.errors import EngineError

__all__ = ["import_all_modules", "import_module", "render_markdown", "DOC_PACKAGES"]

DOC_PACKAGES = ("weir.stores", "weir.recovery", "weir.engine")


OPTIONAL_EXTRAS = {"pyspark": "spark", "py4j": "spark", "pandas": "spark", "pyarrow": "spark"}
"""Libraries of optional extras (``pip install 'weir[spark]'``): a module that needs one cannot
be imported without it, and its keys cannot be used without it either."""


def import_module(name: str, *, extras_optional: bool = False) -> bool:
    """Import module ``name`` to collect its config declarations; a failure raises
    EngineError naming it. With ``extras_optional`` a module that needs a missing optional
    extra (:data:`OPTIONAL_EXTRAS`) is skipped instead (False is returned): checking a
    config must work without the extras, generating the docs must not skip anything."""
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if extras_optional and top in OPTIONAL_EXTRAS:
            return False
        raise EngineError(
            f"cannot import module '{name}' to collect its config declarations "
            f"({type(exc).__name__}: {exc}); fix the module, then run `weir config docs` again"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - any failure means missing declarations
        raise EngineError(
            f"cannot import module '{name}' to collect its config declarations "
            f"({type(exc).__name__}: {exc}); fix the module, then run `weir config docs` again"
        ) from exc
    return True


def _walk(package: str, extras_optional: bool, skipped: list[str]) -> list[str]:
    if not import_module(package, extras_optional=extras_optional):
        skipped.append(package)
        return []
    names = [package]
    pkg = importlib.import_module(package)
    for info in pkgutil.iter_modules(pkg.__path__, prefix=package + "."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue
        if info.ispkg:
            names += _walk(info.name, extras_optional, skipped)
        elif import_module(info.name, extras_optional=extras_optional):
            names.append(info.name)
        else:
            skipped.append(info.name)
    return names


def import_all_modules(packages: tuple[str, ...] = DOC_PACKAGES, *,
                       extras_optional: bool = False,
                       skipped: list[str] | None = None) -> list[str]:
    """Import every module of ``packages`` (except ``__main__``); return their names, sorted.
    ``extras_optional``: skip the modules that need a missing optional extra (their names are
    appended to ``skipped``)."""
    names: list[str] = []
    skipped = [] if skipped is None else skipped
    for package in packages:
        names += _walk(package, extras_optional, skipped)
    return sorted(names)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _format_default(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if isinstance(value, (list, tuple)):
        return f"`{','.join(str(v) for v in value)}`" if value else "(empty)"
    if value == "":
        return '`""`'
    return f"`{value}`"


def _type_name(decl: ConfigKey) -> str:
    return decl.type_name


def _description(decl: ConfigKey) -> str:
    parts = [decl.doc.strip()]
    if isinstance(decl.type, type) and issubclass(decl.type, Enum):
        parts.append("One of: " + ", ".join(f"`{m.value}`" for m in decl.type) + ".")
    if decl.choices:
        parts.append("One of: " + ", ".join(f"`{c}`" for c in decl.choices) + ".")
    if decl.aliases:
        parts.append("Also read as: " + ", ".join(f"`{a}`" for a in decl.aliases) + ".")
    return _cell(" ".join(p for p in parts if p))


def _anchor(component: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces as hyphens."""
    kept = "".join(c for c in component.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def render_markdown(keys: list[ConfigKey] | None = None) -> str:
    """The reference as markdown: one table per component, components and keys sorted."""
    keys = declared_keys() if keys is None else sorted(keys, key=lambda k: k.name)
    groups: dict[str, list[ConfigKey]] = {}
    for decl in keys:
        groups.setdefault(decl.component, []).append(decl)
    lines = [
        "# Weir configuration reference",
        "",
        "Generated by `weir config docs` from the `declare(...)` calls in the code: do not edit",
        "by hand. Placeholders in angle brackets (`<store>`, `<system>`) stand for one name;",
        "`<stream>` may contain dots. How files are read, overridden and checked is explained",
        "in [CONFIGURATION.md](CONFIGURATION.md).",
        "",
        f"{len(keys)} keys in {len(groups)} components:",
        "",
    ]
    for component in sorted(groups):
        lines.append(f"- [{component}](#{_anchor(component)}) ({len(groups[component])})")
    for component in sorted(groups):
        lines += ["", f"## {component}", "",
                  "| key | type | default | description |",
                  "|---|---|---|---|"]
        for decl in groups[component]:
            lines.append(f"| `{_cell(decl.name)}` | {_type_name(decl)} | "
                         f"{_cell(_format_default(decl.default))} | {_description(decl)} |")
    return "\n".join(lines) + "\n"
