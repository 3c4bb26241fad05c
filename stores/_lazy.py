"""Lazy re-exports for package ``__init__`` modules: a name is imported from its module on first
use (PEP 562), so importing a package loads only what its user touches (``weir run`` reads its
config and starts the containers' fork server before the runner and the stores are imported).

Example::

    >>> table = {"dumps": "json"}
    >>> namespace = {}
    >>> getter = lazy_exports("demo", table, namespace)
    >>> getter("dumps")({"a": 1}), "dumps" in namespace
    ('{"a": 1}', True)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, table: Mapping[str, str],
                 namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``table`` maps each exported name to the
    module that defines it; a name, once imported, is stored in ``namespace`` (the package's
    ``globals()``), so later lookups do not come here."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
