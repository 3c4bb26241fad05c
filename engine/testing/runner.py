"""``weir.testing``: run a task or an application to its end in this process, on the memory
system, with inputs given as Python lists; read what it wrote and what its stores hold; inject
a crash at an offset and restart; advance processing time for ``window``.

Samza's ``TestRunner``, Kafka Streams' ``TopologyTestDriver`` and ``bytewax.testing`` in one:
the job runs through the real runner (``run_job``: coordinator stream, checkpoints, stores and
their changelogs, restore), only its systems are the in-process memory system (every system
the job names, ``filelog`` and ``kafka`` included, so a task that hard-codes
``SystemStream("filelog", "out")`` runs unchanged) and its directories a temporary one.

Example::

    >>> from weir import OutgoingMessageEnvelope, StreamTask, SystemStream
    >>> class Upper(StreamTask):
    ...     def process(self, envelope, collector, coordinator):
    ...         collector.send(OutgoingMessageEnvelope(SystemStream("filelog", "upper"),
    ...                                                envelope.message.upper()))
    >>> with TestRunner(Upper, config={"systems.filelog.samza.msg.serde": "string"}) as runner:
    ...     runner.input("filelog.words", ["hello", "world"])
    ...     runner.output("filelog.upper")
    ...     runner.run().output("filelog.upper")
    ['HELLO', 'WORLD']

Inputs are bounded: a run reads them to their end, and the job ends by itself (end-of-stream).
Processing time stands still unless the input lists advance it (:func:`advance`): a task's
``context.clock`` then follows the messages it processes, and its ``window`` runs when that
time crosses a ``task.window.ms`` boundary (docs/TASKS.md, "Testing tasks"). Commits happen
at the start, at end-of-stream and on request (``task.commit.ms`` is -1 unless the config sets
it; ``commit_every=N`` asks for one every N messages), so a crash restores the same state in
every run.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.stores.spec import stores_in

from weir.engine.errors import EngineError
from weir.engine.model import (NO_TIMESTAMP, SystemStream, SystemStreamPartition, make_outgoing,
                               partition_for)
from weir.engine.testing import registry as _registry
from weir.engine.testing.harness import TestHarness, TestPlan

__all__ = ["TestRunner", "RunResult", "Record", "Advance", "advance", "TestRunError"]

log = logging.getLogger("weir.testing")

_ALWAYS_MEMORY = ("filelog", "kafka")
"""Systems a test run puts on the memory system even when nothing names them (the built-in
``filelog`` would otherwise write to ./weir-data/log)."""


class TestRunError(EngineError):
    """A test run failed for another reason than an injected crash (the message has the
    job's summary and the failure), or the runner was used wrongly."""

    __test__ = False


@dataclass(frozen=True)
class Record:
    """One input message with what a plain list item lacks: its key, its partition (else
    chosen from the key, or round-robin), its timestamp (event time). Output records come
    back as Records too, with their partition and offset."""

    message: Any
    key: Any = None
    partition: int | None = None
    timestamp: int = NO_TIMESTAMP
    offset: int | None = None


@dataclass(frozen=True)
class Advance:
    """Processing time passes by ``ms`` at this point of an input list."""

    ms: int


def advance(ms: int) -> Advance:
    """A marker for input lists: ``[m1, m2, advance(10_000), m3]`` -- processing time moves
    10 seconds on between ``m2`` and ``m3``."""
    if ms < 0:
        raise ValueError("processing time does not go back")
    return Advance(ms)


@dataclass
class _Input:
    ss: SystemStream
    partitions: int
    sent: dict[int, int]        # partition -> next offset
    elapsed: int = 0            # processing time at the end of the lists so far
    ended: bool = False


class RunResult:
    """What one :meth:`TestRunner.run` did and left: outputs, stores, metrics, the crash."""

    def __init__(self, runner: "TestRunner", job: Any, crash: tuple | None,
                 stores: dict[str, dict[str, list]], metrics: dict[str, dict]):
        self._runner = runner
        self.job = job
        """The :class:`~weir.engine.container.runner.JobResult` of the run."""
        self.crash: tuple[SystemStreamPartition, int] | None = crash
        """The injected crash that stopped the run: (partition, offset), or None."""
        self._stores = stores
        self._metrics = metrics

    @property
    def crashed(self) -> bool:
        return self.crash is not None

    def records(self, stream: str) -> list[Record]:
        """Every record the stream holds now (every run's output), in partition and offset
        order, deserialized by the stream's serdes."""
        return self._runner.read(stream)

    def output(self, stream: str) -> list[Any]:
        """The messages of :meth:`records`."""
        return [r.message for r in self.records(stream)]

    def store(self, name: str, task: str | None = None) -> dict[Any, Any]:
        """What store ``name`` held when the run ended (a crashed run: at the crash, with its
        uncommitted changes): one task's, or every task's merged."""
        tasks = [task] if task is not None else sorted(self._stores)
        out: dict[Any, Any] = {}
        for t in tasks:
            if t not in self._stores:
                raise TestRunError(f"no task {t!r} in this run (tasks: "
                                   f"{', '.join(sorted(self._stores)) or 'none'})")
            pairs = self._stores[t].get(name)
            if pairs is None:
                raise TestRunError(f"task {t!r} has no store {name!r} (stores: "
                                   f"{', '.join(sorted(self._stores[t])) or 'none'})")
            for key, value in pairs:
                out[_hashable(key)] = value
        return out

    def metrics(self, task: str) -> dict[str, Any]:
        """Task ``task``'s metrics snapshot when the run ended (its own metrics under
        ``"user"``)."""
        try:
            return self._metrics[task]
        except KeyError:
            raise TestRunError(f"no task {task!r} in this run") from None

    @property
    def tasks(self) -> list[str]:
        return sorted(self._stores)


def _hashable(key: Any) -> Any:
    if isinstance(key, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in key.items()))
    if isinstance(key, list):
        return tuple(_hashable(v) for v in key)
    return key


class TestRunner:
    """Runs one task (or application) in this process; see the module docstring.

    ``task``: a task class, a zero-argument factory or ``"module:Class"`` (None when
    ``config`` names ``task.class``); ``app``: a ``StreamApplication`` (class, instance or
    ``"module:Class"``) instead. ``config``: the job's keys, or the path of its
    ``.properties`` / YAML file (whose directory goes on ``sys.path``, as ``weir run`` does). ``system``: the system of stream names given without one.
    ``data_dir``: where checkpoints and stores go (default: a temporary directory removed
    by :meth:`close`). ``start_ms``: the processing time a run starts at.
    ``commit_every``: ask for a commit every N messages of a task.

    The memory system keeps a system's streams per process and name: a runner empties the
    systems it uses when it starts and when it closes, so two runners using the same system
    names must not be open at once.
    """

    __test__ = False

    def __init__(self, task: Any = None, *, app: Any = None,
                 config: Mapping[str, Any] | str | Path | None = None,
                 system: str = "memory", data_dir: str | Path | None = None,
                 start_ms: int = 0, commit_every: int | None = None):
        if task is not None and app is not None:
            raise TestRunError("give a task or an application, not both")
        if isinstance(config, (str, Path)):
            from weir.engine.cli.run import add_config_dir_to_path
            from weir.engine.config.job import load_config
            base = load_config(config)
            add_config_dir_to_path(config)  # task.class beside the file, as `weir run` finds it
        else:
            base = config if isinstance(config, Config) else Config(dict(config or {}))
        self._base = base
        self._registered: list[str] = []
        self._task = self._name_of(task, "task")
        self._app = self._name_of(app, "app")
        if self._task is None and self._app is None and "task.class" not in base \
                and "app.class" not in base:
            raise TestRunError("name the task (TestRunner(MyTask)), the application "
                               "(TestRunner(app=MyApp)) or give a config with task.class")
        self.default_system = base.get_str("job.default.system") or system
        self._own_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="weir-test-") if data_dir is None
                             else data_dir)
        self._inputs: dict[SystemStream, _Input] = {}
        self._pending: dict[SystemStream, list] = {}
        self._outputs: dict[SystemStream, int] = {}
        self._plan = TestPlan(start_ms=start_ms, commit_every=commit_every)
        self._harness = _registry.register(lambda wrapped: TestHarness(wrapped, self._plan),
                                           "harness")
        self._registered.append(self._harness)
        self._systems: set[str] = set(_ALWAYS_MEMORY)
        self._registry: Any = None
        self._closed = False
        self.runs = 0
        self._reset_systems()

    def _name_of(self, obj: Any, hint: str) -> str | None:
        if obj is None or isinstance(obj, str):
            return obj
        name = _registry.register(obj, getattr(obj, "__name__", hint))
        self._registered.append(name)
        return name

    # -- streams ---------------------------------------------------------------------------
    def _ss(self, stream: str | SystemStream) -> SystemStream:
        if isinstance(stream, SystemStream):
            ss = stream
        elif "." in stream:
            ss = SystemStream.parse(stream)
        else:
            ss = SystemStream(self.default_system, stream)
        if ss.system not in self._systems:
            from weir.engine.systems.memory import reset_memory_systems
            reset_memory_systems(ss.system)  # what an earlier runner may have left
            self._systems.add(ss.system)
        return ss

    def input(self, stream: str, messages: Iterable[Any] | Mapping[int, Iterable[Any]], *,
              partitions: int | None = None, key: Callable[[Any], Any] | None = None
              ) -> None:
        """Append ``messages`` to the bounded input ``stream`` (``name`` on the default
        system, or ``system.name``). A list goes to ``partitions`` partitions (default 1) by
        key, else round-robin; a dict ``{partition: list}`` names them. An item is a message,
        a :class:`Record` (key, partition, timestamp) or an :func:`advance` marker. ``key``
        computes a plain message's key (as ``weir log produce --key-field``)."""
        self._check_open()
        ss = self._ss(stream)
        by_partition = isinstance(messages, Mapping)
        count = partitions or (max(messages) + 1 if by_partition and messages else 1)
        inp = self._inputs.get(ss)
        if inp is None:
            inp = self._inputs[ss] = _Input(ss, count, {p: 0 for p in range(count)})
        elif partitions is not None and partitions != inp.partitions:
            raise TestRunError(f"input {ss} has {inp.partitions} partitions, not {partitions}")
        if inp.ended:
            raise TestRunError(f"input {ss} has ended (a run reads its inputs to their end); "
                               f"give every input before the first run")
        pending = self._pending.setdefault(ss, [])
        start, end = inp.elapsed, inp.elapsed
        lists = sorted(messages.items()) if by_partition else [(None, messages)]
        for partition, items in lists:
            at = start  # each partition's list has its own timeline, from the same start
            for item in items:
                if isinstance(item, Advance):
                    at += item.ms
                else:
                    pending.append((partition, item, key, at))
            end = max(end, at)
        inp.elapsed = end
        self._plan.end_time = max(self._plan.end_time, end)

    def output(self, stream: str, partitions: int = 1) -> None:
        """Declare an output stream the task writes (created with ``partitions``)."""
        self._check_open()
        self._outputs[self._ss(stream)] = partitions

    def crash_at(self, stream: str, offset: int, partition: int = 0) -> None:
        """Crash the next run before it processes ``offset`` of ``stream``'s ``partition``
        (once): nothing after the task's last commit is kept, as after ``kill -9``. The run
        after it restarts from the last checkpoint."""
        ss = self._ss(stream)
        self._plan.crashes.add((SystemStreamPartition(ss.system, ss.stream, partition),
                                offset))

    # -- running ---------------------------------------------------------------------------
    def config(self) -> Config:
        """The job config a run uses (the given one, on the memory system, in
        :attr:`data_dir`)."""
        values = dict(self._base)
        origins = dict(self._base.origins)
        memory = set(self._systems)
        for key in list(values):
            parts = key.split(".")
            if parts[0] == "task" and key == "task.inputs":
                for entry in values[key].split(","):
                    if "." in entry.strip():
                        memory.add(entry.strip().split(".", 1)[0])
        for name in stores_in(self._base):
            changelog = self._base.get_str(f"stores.{name}.changelog")
            if changelog and "." in changelog:
                memory.add(changelog.split(".", 1)[0])
        for system in memory:
            prefix = f"systems.{system}."
            for key in [k for k in values if k.startswith(prefix)]:
                rest = key[len(prefix):]
                if not (rest.startswith("samza.") or ".samza." in rest
                        or rest.startswith("default.stream.samza.")):
                    del values[key]  # another system's settings: the memory system has none
            values.pop(f"systems.{system}.samza.factory", None)
            values[f"systems.{system}.factory"] = "memory"
            values.setdefault(f"systems.{system}.default.stream.samza.offset.default", "oldest")
        values.setdefault("job.name", "test-job")
        values["job.data.dir"] = str(self.data_dir)
        values["job.container.count"] = "1"
        values.setdefault("task.commit.ms", "-1")
        for key in ("job.logged.store.base.dir", "job.non-logged.store.base.dir",
                    "task.checkpoint.path"):
            values.pop(key, None)
        if self._task is not None:
            values["task.class"] = self._task
        if self._app is not None:
            values["app.class"] = self._app
        if "task.inputs" not in self._base and self._app is None and "app.class" not in values:
            values["task.inputs"] = ",".join(str(ss) for ss in self._inputs)
        wrappers = [self._harness, *[w.strip() for w in values.get("task.wrapper.class", "")
                                     .split(",") if w.strip()]]
        values["task.wrapper.class"] = ",".join(wrappers)
        return Config(values, origins={k: v for k, v in origins.items() if k in values})

    def _systems_registry(self, config: Config) -> Any:
        from weir.engine.systems.registry import SystemRegistry
        self._registry = SystemRegistry(config)
        return self._registry

    def _create(self, config: Config) -> None:
        """Create the inputs (bounded) and the declared outputs."""
        from weir.engine.systems.api import StreamSpec

        registry = self._systems_registry(config)
        for ss, partitions in self._outputs.items():
            registry.admin(ss.system).create_stream(StreamSpec(ss.stream, partitions))
        for ss, inp in self._inputs.items():
            registry.admin(ss.system).create_stream(
                StreamSpec(ss.stream, inp.partitions, bounded=True))

    def _feed(self, config: Config) -> None:
        """Send what was given to the inputs, with the serdes ``config`` gives them (an
        application's come from its descriptors: its planned job config), and end them."""
        from weir.engine.systems.registry import SystemRegistry

        registry = SystemRegistry(config)
        producers: dict[str, Any] = {}
        for ss, inp in self._inputs.items():
            producer = producers.get(ss.system)
            if producer is None:
                producer = producers[ss.system] = registry.producer(ss.system)
                producer.register("weir.testing")
                producer.start()
            serdes = registry.serdes_for(ss)
            robin = 0
            times = self._plan.times
            for partition, item, key_fn, at in self._pending.pop(ss, []):
                record = item if isinstance(item, Record) else Record(
                    item, key=key_fn(item) if key_fn is not None else None)
                kb = serdes.serialize_key(record.key)
                mb = serdes.serialize_message(record.message)
                p = record.partition if record.partition is not None else partition
                if p is None:
                    if kb is not None:
                        p = partition_for(kb, inp.partitions)
                    else:
                        p, robin = robin % inp.partitions, robin + 1
                if not 0 <= p < inp.partitions:
                    raise TestRunError(f"input {ss} has {inp.partitions} partitions; a record "
                                       f"names partition {p}")
                producer.send("weir.testing", make_outgoing(ss, mb, kb, None, p,
                                                            record.timestamp))
                offset = inp.sent[p]
                inp.sent[p] = offset + 1
                times.setdefault(SystemStreamPartition(ss.system, ss.stream, p), {})[offset] = at
            if not inp.ended:
                producer.flush("weir.testing")
                producer.end_stream(ss.stream)
                inp.ended = True
        for producer in producers.values():
            producer.stop()

    def run(self) -> RunResult:
        """Run the job to its end (or to the planned crash) and return what it did. A job
        that fails otherwise raises :class:`TestRunError` with its summary and error."""
        self._check_open()
        config = self.config()
        self._create(config)
        application = self._app is not None or "app.class" in config
        if application:
            from weir.engine.app.planner import plan_application
            planned = plan_application(config).job_config(None)
            self._feed(planned)
            self._systems_registry(planned)  # outputs read with the descriptors' serdes
        else:
            self._feed(config)
        self._plan.window_ms = _window_ms(config)
        self._plan.store_names = tuple(stores_in(config))
        self._plan.stores.clear()
        self._plan.metrics.clear()
        crashed_before = len(self._plan.crashed)
        from weir.engine.container.status import StatusMode
        if application:
            from weir.engine.app.runner import run_application
            job = run_application(config, status=StatusMode.OFF)
        else:
            from weir.engine.container.runner import run_job
            job = run_job(config, status=StatusMode.OFF)
        self.runs += 1
        crash = self._plan.crashed[-1] if len(self._plan.crashed) > crashed_before else None
        if crash is None and int(job.exit_code) != 0:
            raise TestRunError("the job failed:\n" + "\n".join(job.summary_lines()))
        if crash is None and self._plan.crashes:
            missed = ", ".join(f"{ssp} offset {o}" for ssp, o in sorted(self._plan.crashes))
            self._plan.crashes.clear()
            raise TestRunError(f"the run ended without reaching the planned crash ({missed}): "
                               f"no task processed that offset")
        return RunResult(self, job, crash, dict(self._plan.stores), dict(self._plan.metrics))

    # -- reading ---------------------------------------------------------------------------
    def read(self, stream: str) -> list[Record]:
        """Every record ``stream`` holds, in partition and offset order, deserialized."""
        self._check_open()
        ss = self._ss(stream)
        registry = self._registry or self._systems_registry(self.config())
        admin = registry.admin(ss.system)
        if not admin.stream_exists(ss.stream):
            raise TestRunError(f"no stream {ss}: declare outputs with runner.output(...)")
        ssps = [SystemStreamPartition(ss.system, ss.stream, p)
                for p in range(admin.partition_count(ss.stream))]
        metadata = registry.metadata(ssps)
        serdes = registry.serdes_for(ss)
        consumer = registry.consumer(ss.system)
        out: list[Record] = []
        try:
            for ssp in ssps:
                consumer.register(ssp, metadata[ssp].oldest)
            consumer.start()
            for ssp in ssps:
                end = metadata[ssp].upcoming
                got: list[Record] = []
                while not got or got[-1].offset < end - 1:
                    if metadata[ssp].oldest >= end:
                        break
                    batch = consumer.poll([ssp], 1000).get(ssp, [])
                    if not batch:
                        raise TestRunError(f"cannot read {ssp} up to offset {end - 1}")
                    for env in batch:
                        if env.kind.value != "message" or env.offset >= end:
                            continue
                        typed = serdes.deserialize(env)
                        got.append(Record(typed.message, typed.key, ssp.partition,
                                          typed.timestamp, typed.offset))
                out.extend(got)
        finally:
            consumer.stop()
        return out

    # -- life ------------------------------------------------------------------------------
    def _reset_systems(self) -> None:
        from weir.engine.systems.memory import reset_memory_systems
        reset_memory_systems(*sorted(self._systems | {self.default_system}))

    def _check_open(self) -> None:
        if self._closed:
            raise TestRunError("this TestRunner is closed (its streams are gone): read "
                               "outputs before closing it")

    def close(self) -> None:
        """Forget the memory streams, the registered task and remove the data directory
        this runner created."""
        if self._closed:
            return
        self._closed = True
        self._reset_systems()
        for name in self._registered:
            _registry.unregister(name)
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "TestRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _window_ms(config: Config) -> int:
    from weir.engine.runloop.settings import TASK_WINDOW_MS
    try:
        return TASK_WINDOW_MS.get(config)
    except ConfigError:
        return -1
