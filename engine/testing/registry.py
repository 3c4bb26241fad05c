"""In-process objects named in a job config: how ``weir.testing`` runs a task class defined
anywhere (a test function's local class, a lambda factory) and its own task wrapper.

A job config names classes as ``module:attr`` strings. :func:`register` keeps an object and
returns a name that resolves to it through this module's ``__getattr__`` for as long as the
registration lives (:func:`unregister`). Only the process that registered it can resolve it,
so a job using it runs its containers in that process (``weir.testing`` runs one container on
the memory system).

Example::

    >>> name = register(lambda: "a task")
    >>> from weir.engine.task import load_object
    >>> load_object(name)()
    'a task'
    >>> unregister(name)
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

__all__ = ["register", "unregister"]

_objects: dict[str, Any] = {}
_counter = itertools.count(1)
_lock = threading.Lock()


def register(obj: Any, hint: str = "obj") -> str:
    """Keep ``obj``; return the ``module:attr`` name a config uses for it."""
    safe = "".join(c if c.isalnum() else "_" for c in hint)[:40] or "obj"
    with _lock:
        attr = f"{safe}_{next(_counter)}"
        _objects[attr] = obj
    return f"{__name__}:{attr}"


def unregister(name: str) -> None:
    """Forget what :func:`register` returned ``name`` for."""
    with _lock:
        _objects.pop(name.rpartition(":")[2], None)


def __getattr__(attr: str) -> Any:
    try:
        return _objects[attr]
    except KeyError:
        raise AttributeError(f"no object registered as {attr!r} in this process (a "
                             f"weir.testing run names its task here; it cannot be used from "
                             f"another process or after the runner closed)") from None
