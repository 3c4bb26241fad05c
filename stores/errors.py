"""The Weir error hierarchy's root and the storage core's errors.

Every Weir error derives from :class:`WeirError`. Each package has one base
(:class:`StoreError` here, ``RecoveryError`` in ``recovery``, ``EngineError`` in
``engine``) and :class:`ConfigError` is shared by all of them because config is
parsed at every edge. Messages name the object (store, key, path, config key with
``file:line``) and say what the operator should do next.

Recoverable conditions have their own types so the runtime can react to them:
:class:`StoreLockedError` (wait or stop the other process).
"""

from __future__ import annotations

__all__ = [
    "WeirError",
    "ConfigError",
    "StoreError",
    "StoreClosedError",
    "ReadOnlyStoreError",
    "StoreLockedError",
    "SerdeError",
    "StoredDataError",
    "NullKeyOrValueError",
]


class WeirError(Exception):
    """Root of every error Weir raises on purpose."""


class ConfigError(WeirError, ValueError):
    """A config key is missing, unknown or has a bad value.

    ``key`` is the config key, ``origin`` where it was set (``"job.properties:12"``,
    ``"--set"``) or ``None`` when the key was not set at all.
    """

    def __init__(self, message: str, *, key: str | None = None, origin: str | None = None):
        where = f" (set at {origin})" if origin else ""
        if key:
            prefix = f"config key '{key}'{where}: "
        else:
            prefix = f"{origin}: " if origin else ""
        super().__init__(prefix + message)
        self.key = key
        self.origin = origin


class StoreError(WeirError):
    """Base of the storage core's errors. ``store`` names the store when known."""

    def __init__(self, message: str, *, store: str | None = None):
        super().__init__(f"store '{store}': {message}" if store else message)
        self.store = store


class StoreClosedError(StoreError):
    """An operation was attempted on a closed store or a closed iterator."""


class ReadOnlyStoreError(StoreError):
    """A write was attempted on a read-only store (an adjunct store's task view)."""


class StoreLockedError(StoreError):
    """The store's directory is locked by another live process.

    ``holder`` describes the lock holder (``pid``, ``host``) when it could be read.
    """

    def __init__(self, message: str, *, store: str | None = None, path: str | None = None,
                 holder: dict | None = None):
        super().__init__(message, store=store)
        self.path = path
        self.holder = holder or {}


class SerdeError(StoreError):
    """A key or value could not be serialized or deserialized."""

    def __init__(self, message: str, *, store: str | None = None, key: object = None):
        super().__init__(message, store=store)
        self.key = key


class StoredDataError(SerdeError):
    """A key or value already in the store cannot be deserialized with the store's serdes:
    the store's data and its ``key.serde``/``msg.serde`` settings disagree (a serde changed
    under existing state, or damaged bytes). Not a property of the message being processed,
    so the run loop never skips it (``task.ignored.exceptions`` does not match it)."""


class NullKeyOrValueError(StoreError, ValueError):
    """A ``None`` key or value was given; deletes use ``delete``, not ``put(k, None)``."""
