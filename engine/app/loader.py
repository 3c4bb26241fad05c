"""Loading an application: the object ``app.class`` names and its ``describe`` run on a
fresh :class:`~weir.engine.app.api.ApplicationDescriptor` (once per caller: the planner and
every :class:`~weir.engine.app.task.ApplicationTask` get their own operator functions, as in
Samza)."""

from __future__ import annotations

from typing import Any

from weir.stores.config import Config, ConfigError

from weir.engine.app.api import ApplicationDescriptor, StreamApplication
from weir.engine.app.errors import ApplicationError
from weir.engine.app.settings import APP_CLASS, app_identity
from weir.engine.task import load_object

__all__ = ["load_application", "describe_application"]


def load_application(config: Config) -> Any:
    """The object ``app.class`` names: a StreamApplication instance (a class is made with no
    arguments), or a callable ``describe(app)``."""
    key = APP_CLASS.name
    spec = config.require(key)
    target = load_object(spec, key=key, origin=config.origin(key))
    if isinstance(target, type):
        target = target()
    if not (isinstance(target, StreamApplication) or callable(getattr(target, "describe", None))
            or callable(target)):
        raise ConfigError(f"{spec!r} is neither a StreamApplication nor a function taking the "
                          f"application descriptor", key=key, origin=config.origin(key))
    return target


def describe_application(config: Config) -> ApplicationDescriptor:
    """Run the application's ``describe`` on a fresh descriptor (once per caller: every task
    gets its own operator functions, as in Samza)."""
    app = load_application(config)
    name, app_id = app_identity(config)
    descriptor = ApplicationDescriptor(config, name, app_id)
    describe = getattr(app, "describe", None)
    (describe if callable(describe) else app)(descriptor)
    if not descriptor.graph.inputs:
        raise ApplicationError(f"application {config.get_str(APP_CLASS.name)!r} declares no "
                               f"input: call app.input(...) in describe()")
    return descriptor
