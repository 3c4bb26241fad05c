"""Writing a job's config to its coordinator stream: changed keys only, deletes for removed keys.

On submission (``weir run``) the config file (with ``--set`` overrides) is the job's config:
:func:`config_messages` compares it with what the stream holds and writes a ``set-config``
for every key that is new or has another value, and a delete for every key the stream holds
that the new config lacks (docs/COORDINATOR.md; Samza rewrites every key, Weir only the
changes, so an unchanged resubmission writes nothing).

Example::

    >>> from weir.stores.config import Config
    >>> old = Config({"a": "1", "b": "2", "gone": "x"})
    >>> new = Config({"a": "1", "b": "3", "c": "4"})
    >>> diff = ConfigDiff.between(old, new)
    >>> diff.added, diff.changed, diff.removed
    (('c',), ('b',), ('gone',))
    >>> [(m.key, m.is_delete) for m in config_messages(old, new, source="doc")]
    [('b', False), ('c', False), ('gone', True)]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from weir.stores.config import Config

from weir.engine.coordinator.messages import CoordinatorMessage, MessageType

__all__ = ["ConfigDiff", "config_messages", "merge_origins"]


@dataclass(frozen=True)
class ConfigDiff:
    """Keys added, changed and removed between two configs (each sorted)."""

    added: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]

    @classmethod
    def between(cls, old: Mapping[str, str], new: Mapping[str, str]) -> "ConfigDiff":
        return cls(tuple(sorted(k for k in new if k not in old)),
                   tuple(sorted(k for k in new if k in old and old[k] != new[k])),
                   tuple(sorted(k for k in old if k not in new)))

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def describe(self) -> str:
        parts = [f"{len(self.added)} added", f"{len(self.changed)} changed",
                 f"{len(self.removed)} removed"]
        keys = [*self.added, *self.changed, *self.removed]
        shown = ", ".join(keys[:8]) + (f", ... ({len(keys) - 8} more)" if len(keys) > 8 else "")
        return ", ".join(parts) + (f" ({shown})" if keys else "")


def config_messages(old: Mapping[str, str], new: Mapping[str, str], *,
                    source: str) -> list[CoordinatorMessage]:
    """``set-config`` for new and changed keys, then deletes for removed keys (sorted)."""
    diff = ConfigDiff.between(old, new)
    out = [CoordinatorMessage.set_config(k, new[k], source=source)
           for k in sorted(diff.added + diff.changed)]
    out += [CoordinatorMessage.delete(MessageType.SET_CONFIG, k, source=source)
            for k in diff.removed]
    return out


def merge_origins(stream_config: Config, submitted: Config) -> Config:
    """``stream_config`` with the origins of ``submitted`` where both hold the same value
    (``file:line`` is more useful in an error than a stream offset)."""
    origins = dict(stream_config.origins)
    for key in stream_config:
        if key in submitted and submitted[key] == stream_config[key] and submitted.origin(key):
            origins[key] = submitted.origin(key)
    return Config(dict(stream_config), origins=origins)
