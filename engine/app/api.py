"""The high-level API: describe a pipeline as operators on message streams.

A Python counterpart of Samza's ``StreamApplication``: a class with ``describe(app)`` (or a
plain function taking ``app``), named in the job config with ``app.class=module:Name``::

    from weir.app import KV, StreamApplication, Windows, count

    class PageViewsPerMinute(StreamApplication):
        def describe(self, app):
            views = app.input("filelog.pageviews", timestamp=lambda v: v["ts"])
            (views.filter(lambda v: v["user"] is not None)
                  .partition_by(lambda v: v["user"], name="by-user")
                  .window(Windows.tumbling(60_000, aggregate=count()), name="per-minute")
                  .send_to(app.output("filelog.views-per-minute")))

Elements flow through ``map``, ``flat_map``, ``filter`` and ``merge`` as plain values, each with
an **event time** (the input's ``timestamp=`` function, else the record's timestamp) that
operators carry along. ``partition_by(key_fn, value_fn=None, name=...)`` repartitions: it
writes ``KV(key_fn(m), value_fn(m))`` to an intermediate stream partitioned by the key, and
the stream it returns reads that stream, so everything after it runs in another *stage*
where all elements of one key meet in one task. ``window``, ``join`` and ``join_table`` keep
their state in Weir stores (restored after a crash like any task's). ``send_to`` writes to an
output stream or into a table, ``sink`` calls a function.

The planner (:mod:`weir.engine.app.planner`) cuts the graph at every ``partition_by`` into
stages and runs them as tasks on the ordinary run loop; docs/APPLICATIONS.md is the guide.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from weir.stores.config import Config

from weir.engine.app.errors import ApplicationError
from weir.engine.app.graph import OpCode, OperatorGraph, OpSpec
from weir.engine.app.windows import WindowSpec
from weir.engine.config.streams import JOB_DEFAULT_SYSTEM
from weir.engine.model import SystemStream

__all__ = ["KV", "StreamApplication", "ApplicationDescriptor", "MessageStream", "WindowedStream",
           "OutputStream", "Table"]


class KV(NamedTuple):
    """A keyed element: what ``partition_by`` emits and what ``send_to`` writes as key and
    message."""

    key: Any
    value: Any


class StreamApplication:
    """Base of a high-level application: implement :meth:`describe`."""

    def describe(self, app: "ApplicationDescriptor") -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement describe(app)")


class OutputStream:
    """An output stream (``app.output(...)``), the target of ``send_to``."""

    def __init__(self, stream: SystemStream, *, key_serde: str | None, msg_serde: str | None,
                 partitions: int | None):
        self.stream, self.key_serde, self.msg_serde = stream, key_serde, msg_serde
        self.partitions = partitions

    def __repr__(self) -> str:
        return f"OutputStream({self.stream})"


class Table:
    """A task-local key-value table kept in a Weir store named ``name`` (``app.table``):
    fill it with ``stream.send_to(table)``, read it with ``stream.join_table(table, ...)``.
    Both must be in the same stage and partitioned alike (each task holds its partitions'
    rows)."""

    def __init__(self, name: str, *, factory: str | None, key_serde: str, msg_serde: str):
        self.name, self.factory = name, factory
        self.key_serde, self.msg_serde = key_serde, msg_serde

    def __repr__(self) -> str:
        return f"Table({self.name!r})"


def _callable(fn: Any, what: str) -> Callable:
    if not callable(fn):
        raise ApplicationError(f"{what} must be callable, got {fn!r}")
    return fn


class MessageStream:
    """A stream of elements in the graph; every method adds an operator."""

    def __init__(self, app: "ApplicationDescriptor", spec: OpSpec):
        self._app, self.spec = app, spec

    def _then(self, spec: OpSpec, inputs: Iterable[OpSpec] | None = None) -> "MessageStream":
        self._app.graph.add(spec, [self.spec] if inputs is None else inputs)
        return MessageStream(self._app, spec)

    def map(self, fn: Callable[[Any], Any], *, name: str | None = None) -> "MessageStream":
        """``fn(element)`` for every element."""
        return self._then(OpSpec(OpCode.MAP, name, fn=_callable(fn, "map's function")))

    def flat_map(self, fn: Callable[[Any], Iterable[Any]], *,
                 name: str | None = None) -> "MessageStream":
        """Every element of ``fn(element)`` (an iterable), each with the element's event time."""
        return self._then(OpSpec(OpCode.FLAT_MAP, name, fn=_callable(fn, "flat_map's function")))

    def filter(self, fn: Callable[[Any], bool], *, name: str | None = None) -> "MessageStream":
        """The elements for which ``fn(element)`` is true."""
        return self._then(OpSpec(OpCode.FILTER, name, fn=_callable(fn, "filter's function")))

    def merge(self, *others: "MessageStream", name: str | None = None) -> "MessageStream":
        """The elements of this stream and of ``others``; the merged watermark is the
        minimum of theirs."""
        streams = [self, *others]
        for s in streams:
            if not isinstance(s, MessageStream) or s._app is not self._app:
                raise ApplicationError(f"merge() takes message streams of the same "
                                       f"application, got {s!r}")
        return self._then(OpSpec(OpCode.MERGE, name), [s.spec for s in streams])

    def partition_by(self, key_fn: Callable[[Any], Any], value_fn: Callable[[Any], Any] | None = None,
                     *, name: str, partitions: int | None = None, key_serde: str | None = None,
                     msg_serde: str | None = None) -> "MessageStream":
        """Repartition by ``key_fn(element)``: the returned stream has ``KV(key, value)``
        elements (``value_fn(element)``, the element itself by default), all elements of a
        key in one partition. ``name`` names the intermediate stream
        (``<app>-<id>-partition_by-<name>``); ``partitions`` its partition count (default
        ``job.intermediate.stream.partitions``, else inferred). Keys and values travel as
        MessagePack unless ``key_serde``/``msg_serde`` name other serdes."""
        app = self._app
        spec = OpSpec(OpCode.PARTITION_BY, name, key_fn=_callable(key_fn, "partition_by's key"),
                      value_fn=value_fn if value_fn is None else _callable(value_fn, "value_fn"),
                      partitions=partitions, key_serde=key_serde, msg_serde=msg_serde)
        if partitions is not None and (not isinstance(partitions, int) or partitions < 1):
            raise ApplicationError(f"partition_by {name!r}: partitions must be a positive "
                                   f"integer, got {partitions!r}")
        app.graph.add(spec, [self.spec])
        stream = SystemStream(app.intermediate_system, spec.id)
        source = OpSpec(OpCode.INPUT, None, stream=stream, producer=spec, timestamp=None,
                        kv=True)
        spec.params["stream"] = stream
        app.graph.add(source, [])
        return MessageStream(app, source)

    def window(self, window: WindowSpec, *, name: str) -> "WindowedStream":
        """Group into windows (event time or processing time, see
        :mod:`weir.engine.app.windows`); the returned stream has
        :class:`~weir.engine.app.windows.WindowPane` elements, and its
        :meth:`~WindowedStream.late_elements` the elements the window dropped as too late."""
        if not isinstance(window, WindowSpec):
            raise ApplicationError(f"window {name!r}: expected Windows.tumbling(...), "
                                   f"Windows.session(...) or one of Samza's "
                                   f"(Windows.keyed_tumbling_window(...), ...), got {window!r}")
        self._app.graph.add(spec := OpSpec(OpCode.WINDOW, name, window=window), [self.spec])
        return WindowedStream(self._app, spec)

    def join(self, other: "MessageStream", *, key: Callable[[Any], Any],
             other_key: Callable[[Any], Any] | None = None,
             fn: Callable[[Any, Any], Any] = lambda a, b: (a, b), within_ms: int,
             name: str) -> "MessageStream":
        """Stream-stream join within a time bound: ``fn(a, b)`` for every pair of an element
        ``a`` of this stream and ``b`` of ``other`` with ``key(a) == other_key(b)`` and event
        times at most ``within_ms`` apart. Both streams must be partitioned by the join key
        into the same number of partitions (``partition_by`` both, or co-partitioned inputs).
        Elements behind the watermark are dropped (counted); state is pruned by watermark."""
        if not isinstance(other, MessageStream) or other._app is not self._app:
            raise ApplicationError(f"join {name!r}: the other side must be a message stream of "
                                   f"the same application, got {other!r}")
        if not isinstance(within_ms, int) or within_ms < 0:
            raise ApplicationError(f"join {name!r}: within_ms must be an integer >= 0, got "
                                   f"{within_ms!r}")
        return self._then(OpSpec(OpCode.JOIN, name, key=_callable(key, "join's key"),
                                 other_key=_callable(other_key or key, "join's other_key"),
                                 fn=_callable(fn, "join's fn"), within_ms=within_ms),
                          [self.spec, other.spec])

    def join_table(self, table: Table, *, key: Callable[[Any], Any],
                   fn: Callable[[Any, Any], Any] = lambda element, row: (element, row),
                   how: str = "inner", name: str | None = None) -> "MessageStream":
        """Stream-table join: ``fn(element, table[key(element)])``; with ``how="inner"``
        elements without a row are dropped, with ``how="left"`` they join ``None``."""
        if not isinstance(table, Table):
            raise ApplicationError(f"join_table expects app.table(...), got {table!r}")
        if how not in ("inner", "left"):
            raise ApplicationError(f"join_table: how must be 'inner' or 'left', got {how!r}")
        return self._then(OpSpec(OpCode.JOIN_TABLE, name, table=table,
                                 key=_callable(key, "join_table's key"),
                                 fn=_callable(fn, "join_table's fn"), how=how))

    def send_to(self, target: OutputStream | Table, *, key: Callable[[Any], Any] | None = None,
                value: Callable[[Any], Any] | None = None, name: str | None = None) -> None:
        """Write every element to an output stream or a table. Key and message: ``key(e)``
        and ``value(e)`` when given; else a ``KV``'s key and value, a
        :class:`~weir.engine.app.windows.WindowPane`'s key and ``to_dict()``, or no key and
        the element. Into a table, a ``None`` value deletes the row."""
        if isinstance(target, Table):
            self._then(OpSpec(OpCode.SEND_TO_TABLE, name, table=target, key=key, value=value))
        elif isinstance(target, OutputStream):
            self._then(OpSpec(OpCode.SEND_TO, name, output=target, stream=target.stream,
                              key=key, value=value))
        else:
            raise ApplicationError(f"send_to expects app.output(...) or app.table(...), got "
                                   f"{target!r}")

    def sink(self, fn: Callable[[Any, Any, Any], None], *, name: str | None = None) -> None:
        """``fn(element, collector, coordinator)`` for every element (Samza's SinkFunction)."""
        self._then(OpSpec(OpCode.SINK, name, fn=_callable(fn, "sink's function")))


class WindowedStream(MessageStream):
    """The panes of a window (what :meth:`MessageStream.window` returns)."""

    def late_elements(self, *, name: str | None = None) -> MessageStream:
        """The window's **late side output**: every element the window drops because it
        arrived after its window's allowed lateness, with its event time (Flink's
        ``sideOutputLateData``). Without it such elements are only counted and logged.
        They are behind the watermark: send them to an output or a sink::

            panes = by_user.window(Windows.tumbling(60_000), name="per-minute")
            panes.send_to(app.output("filelog.views-per-minute", partitions=4))
            panes.late_elements().send_to(app.output("filelog.late-views", partitions=4))
        """
        return self._then(OpSpec(OpCode.LATE_ELEMENTS, name))


class ApplicationDescriptor:
    """What ``describe(app)`` receives: inputs, outputs, tables and the job config."""

    def __init__(self, config: Config, app_name: str, app_id: str):
        self.config = config
        self.graph = OperatorGraph(app_name, app_id)
        self.outputs: dict[SystemStream, OutputStream] = {}
        self.tables: dict[str, Table] = {}
        self.intermediate_system = JOB_DEFAULT_SYSTEM.get(config) or "filelog"

    def _stream(self, name: str) -> SystemStream:
        if not isinstance(name, str) or not name.strip():
            raise ApplicationError(f"a stream is named 'system.stream' (or a bare stream on "
                                   f"job.default.system), got {name!r}")
        if "." in name:
            return SystemStream.parse(name)
        return SystemStream(self.intermediate_system, name.strip())

    def input(self, stream: str, *, timestamp: Callable[[Any], int] | None = None,
              kv: bool = False, key_serde: str | None = None,
              msg_serde: str | None = None) -> MessageStream:
        """A source stream. ``timestamp(element)`` gives an element's event time in ms
        (default: the record's timestamp); ``kv=True`` makes elements ``KV(key, message)``
        instead of the message alone; ``key_serde``/``msg_serde`` set the stream's serdes
        unless the config already does."""
        ss = self._stream(stream)
        if ss in self.graph.inputs:
            raise ApplicationError(f"input {ss} is declared twice; use the stream returned by "
                                   f"the first app.input(...) (merge or reuse it)")
        spec = OpSpec(OpCode.INPUT, None, stream=ss, producer=None,
                      timestamp=None if timestamp is None else _callable(timestamp, "timestamp"),
                      kv=bool(kv), key_serde=key_serde, msg_serde=msg_serde)
        self.graph.add(spec, [])
        return MessageStream(self, spec)

    def output(self, stream: str, *, key_serde: str | None = None, msg_serde: str | None = None,
               partitions: int | None = None) -> OutputStream:
        """An output stream; created with ``partitions`` partitions when it does not exist
        (without ``partitions`` it must exist)."""
        ss = self._stream(stream)
        out = self.outputs.get(ss)
        if out is None:
            out = self.outputs[ss] = OutputStream(ss, key_serde=key_serde, msg_serde=msg_serde,
                                                  partitions=partitions)
        return out

    def table(self, name: str, *, factory: str | None = None, key_serde: str = "weir-key",
              msg_serde: str = "msgpack") -> Table:
        """A table kept in the store ``name`` (``stores.<name>.*`` in the config win over
        these defaults: ``app.store.factory``, MessagePack keys and values, a changelog)."""
        table = self.tables.get(name)
        if table is None:
            table = self.tables[name] = Table(name, factory=factory, key_serde=key_serde,
                                              msg_serde=msg_serde)
        return table
