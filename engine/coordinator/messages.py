"""Coordinator stream messages: Samza's key and value format, byte for byte.

Every message is a key/value pair, both compact JSON (no whitespace) in UTF-8
(docs/COORDINATOR.md, "Messages"):

* key: ``[version, type, key]`` with version the integer ``1``, e.g.
  ``[1,"set-config","job.name"]``;
* value: ``{"host":...,"username":...,"source":...,"timestamp":...,"values":{...}}``, or
  **null** for a delete (a tombstone: compaction then drops the key).

The types Weir writes (:class:`MessageType`): ``set-config`` (config key ->
``{"value": ...}``), ``set-changelog`` (task name -> ``{"Partition": "<n>"}``),
``set-container-host-assignment`` (container id -> ``{"host", "jmx-url",
"jmx-tunneling-url"}``), ``set-task-container-assignment`` (task name -> ``{"containerId"}``)
and ``set-task-partition-assignment`` (an input partition as JSON -> ``{"taskNames": "<JSON
list>"}``). Other types are kept as read (Samza's other namespaces).

Example::

    >>> m = CoordinatorMessage.set_config("job.name", "test-job", source="doc",
    ...                                   host="10.0.0.1", username="ann", timestamp=1)
    >>> m.key_bytes()
    b'[1,"set-config","job.name"]'
    >>> m.value_bytes()
    b'{"host":"10.0.0.1","username":"ann","source":"doc","timestamp":1,"values":{"value":"test-job"}}'
    >>> CoordinatorMessage.delete(MessageType.SET_CONFIG, "job.name", source="doc").value_bytes() is None
    True
"""

from __future__ import annotations

import functools
import getpass
import socket
import time
from collections.abc import Mapping
from enum import Enum
from typing import Any

import orjson

from weir.engine.jobmodel.frozen import FrozenMap

__all__ = [
    "VERSION",
    "MessageType",
    "CoordinatorMessage",
    "decode_message",
    "MessageDecodeError",
    "writer_host",
    "writer_username",
]

VERSION = 1
"""The key format version Samza writes (and the only one it reads)."""


class MessageType(str, Enum):
    """The message types (namespaces) Weir writes and reads."""

    SET_CONFIG = "set-config"
    SET_CHANGELOG = "set-changelog"
    SET_CONTAINER_HOST_ASSIGNMENT = "set-container-host-assignment"
    SET_TASK_CONTAINER_ASSIGNMENT = "set-task-container-assignment"
    SET_TASK_PARTITION_ASSIGNMENT = "set-task-partition-assignment"

    def __str__(self) -> str:
        return self.value


class MessageDecodeError(ValueError):
    """A record is not a coordinator message; the store adds stream and offset."""


@functools.cache
def writer_host() -> str:
    """The writer's address as Samza records it (the IP of this host's name), or the host
    name when it does not resolve."""
    name = socket.gethostname()
    try:
        return socket.gethostbyname(name)
    except OSError:
        return name


@functools.cache
def writer_username() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


class CoordinatorMessage:
    """One coordinator stream message. ``values`` is None for a delete.

    Equality follows Samza's: type, key and values; host, user, source, timestamp and the
    offset it was read from are ignored. Messages are immutable by convention (a plain
    slotted class: bootstrap builds one per record, and a frozen dataclass costs three times
    as much to build); ``values`` is a read-only mapping.
    """

    __slots__ = ("type", "key", "values", "source", "host", "username", "timestamp", "offset")

    def __init__(self, type: str, key: str, values: Mapping[str, Any] | None, source: str = "",
                 host: str = "", username: str = "", timestamp: int = 0,
                 offset: int | None = None):
        self.type = str(type)
        self.key = key
        self.values = values if values is None or isinstance(values, FrozenMap) \
            else FrozenMap(values)
        self.source, self.host, self.username = source, host, username
        self.timestamp, self.offset = timestamp, offset

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CoordinatorMessage):
            return NotImplemented
        return (self.type, self.key, self.values) == (other.type, other.key, other.values)

    def __hash__(self) -> int:
        return hash((self.type, self.key, self.values))

    def __repr__(self) -> str:
        return (f"CoordinatorMessage({self.type!r}, {self.key!r}, {self.values!r}, "
                f"source={self.source!r}, offset={self.offset})")

    # -- constructors ----------------------------------------------------------------------
    @classmethod
    def make(cls, type: str, key: str, values: Mapping[str, Any] | None, *, source: str,
             host: str | None = None, username: str | None = None,
             timestamp: int | None = None) -> "CoordinatorMessage":
        """A message written now by ``source`` on this host as this user (unless given)."""
        return cls(str(type), str(key), values, source,
                   writer_host() if host is None else host,
                   writer_username() if username is None else username,
                   int(time.time() * 1000) if timestamp is None else timestamp)

    @classmethod
    def set_config(cls, key: str, value: str, *, source: str, **kw: Any) -> "CoordinatorMessage":
        return cls.make(MessageType.SET_CONFIG, key, {"value": str(value)}, source=source, **kw)

    @classmethod
    def set_changelog(cls, task: str, partition: int, *, source: str,
                      **kw: Any) -> "CoordinatorMessage":
        return cls.make(MessageType.SET_CHANGELOG, task, {"Partition": str(int(partition))},
                        source=source, **kw)

    @classmethod
    def set_container_host(cls, container_id: str, container_host: str, *, source: str,
                           jmx_url: str = "", jmx_tunneling_url: str = "",
                           **kw: Any) -> "CoordinatorMessage":
        """Where container ``container_id`` runs (``host`` in ``kw`` is the writer's)."""
        return cls.make(MessageType.SET_CONTAINER_HOST_ASSIGNMENT, container_id,
                        {"host": container_host, "jmx-url": jmx_url,
                         "jmx-tunneling-url": jmx_tunneling_url},
                        source=source, **kw)

    @classmethod
    def set_task_container(cls, task: str, container_id: str, *, source: str,
                           **kw: Any) -> "CoordinatorMessage":
        return cls.make(MessageType.SET_TASK_CONTAINER_ASSIGNMENT, task,
                        {"containerId": str(container_id)}, source=source, **kw)

    @classmethod
    def set_task_partition(cls, system: str, stream: str, partition: int, tasks: list[str], *,
                           source: str, **kw: Any) -> "CoordinatorMessage":
        return cls.make(MessageType.SET_TASK_PARTITION_ASSIGNMENT,
                        ssp_key(system, stream, partition),
                        {"taskNames": orjson.dumps(sorted(tasks)).decode()}, source=source, **kw)

    @classmethod
    def delete(cls, type: str, key: str, *, source: str, **kw: Any) -> "CoordinatorMessage":
        """A tombstone: the key keeps its type, so compaction collapses it."""
        return cls.make(type, key, None, source=source, **kw)

    # -- properties ------------------------------------------------------------------------
    @property
    def is_delete(self) -> bool:
        return self.values is None

    def value(self, field_name: str) -> Any:
        """One field of ``values`` (None for a delete or a missing field)."""
        return None if self.values is None else self.values.get(field_name)

    # -- bytes -----------------------------------------------------------------------------
    def key_bytes(self) -> bytes:
        return orjson.dumps([VERSION, self.type, self.key])

    def value_bytes(self) -> bytes | None:
        if self.values is None:
            return None
        return orjson.dumps({"host": self.host, "username": self.username,
                             "source": self.source, "timestamp": self.timestamp,
                             "values": dict(self.values)})


def ssp_key(system: str, stream: str, partition: int) -> str:
    """The key of a ``set-task-partition-assignment`` message: the partition as JSON."""
    return orjson.dumps({"system": system, "stream": stream, "partition": int(partition),
                         "keyBucket": -1}).decode()


__all__ += ["ssp_key"]


def decode_message(key: bytes | None, value: bytes | None,
                   offset: int | None = None) -> CoordinatorMessage:
    """A message from its key and value bytes. Raises MessageDecodeError saying what is
    wrong (the caller names stream and offset)."""
    if key is None:
        raise MessageDecodeError("the record has no key (a coordinator message's key is "
                                 "[version, type, key])")
    try:
        parts = _loads(key)
    except orjson.JSONDecodeError as exc:
        raise MessageDecodeError(f"the key is not JSON ({exc}): {_excerpt(key)}") from None
    if (type(parts) is not list or len(parts) != 3 or type(parts[1]) is not str
            or type(parts[2]) is not str):
        raise MessageDecodeError(f"the key is not [version, type, key] with string type and "
                                 f"key: {_excerpt(key)}")
    version = parts[0]
    if version != VERSION and version != _VERSION_TEXT:
        raise MessageDecodeError(f"the key has format version {version!r}; this Weir reads "
                                 f"version {VERSION} (written by a newer Weir or another tool)")
    msg = _new(CoordinatorMessage)
    msg.type, msg.key, msg.offset = parts[1], parts[2], offset
    if value is None:
        msg.values, msg.source, msg.host, msg.username, msg.timestamp = None, "", "", "", 0
        return msg
    try:
        body = _loads(value)
    except orjson.JSONDecodeError as exc:
        raise MessageDecodeError(f"the value of {parts[1]} {parts[2]!r} is not JSON ({exc}): "
                                 f"{_excerpt(value)}") from None
    values = body.get("values") if type(body) is dict else None
    if type(values) is not dict:
        raise MessageDecodeError(f"the value of {parts[1]} {parts[2]!r} is not an object with "
                                 f"a 'values' object: {_excerpt(value)}")
    timestamp = body.get("timestamp", 0)
    msg.values = FrozenMap(values)
    msg.source = str(body.get("source", ""))
    msg.host = str(body.get("host", ""))
    msg.username = str(body.get("username", ""))
    msg.timestamp = timestamp if type(timestamp) is int else 0
    return msg


_loads = orjson.loads
_new = object.__new__
_VERSION_TEXT = str(VERSION)


def _excerpt(data: bytes, limit: int = 80) -> str:
    text = data[:limit].decode("utf-8", "replace")
    return repr(text + ("..." if len(data) > limit else ""))
