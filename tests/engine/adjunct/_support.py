"""Helpers for adjunct store tests: a file-log job config, producing, reading outputs."""

from __future__ import annotations

import threading
from pathlib import Path

from weir.engine.container.container import Container, ProgressMode
from weir.engine.jobmodel.model import build_job_model
from weir.engine.model import OutgoingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config

SYSTEM = "log"
PARTITIONS = 2


def config(tmp_path: Path, *, broadcast: bool = True, bootstrap: bool = True,
           engine: str = "rocksdb", task: str = "Enrich", **extra: str) -> Config:
    values = {
        "job.name": "enrich",
        "task.class": f"tests.engine.adjunct._tasks:{task}",
        "task.inputs": f"{SYSTEM}.clicks" + ("" if broadcast else f",{SYSTEM}.products"),
        "task.checkpoint.path": str(tmp_path / "checkpoints"),
        "job.logged.store.base.dir": str(tmp_path / "state"),
        "job.non-logged.store.base.dir": str(tmp_path / "state"),
        f"systems.{SYSTEM}.factory": "filelog",
        f"systems.{SYSTEM}.root": str(tmp_path / "log"),
        f"systems.{SYSTEM}.samza.key.serde": "string",
        f"systems.{SYSTEM}.samza.msg.serde": "json",
        f"systems.{SYSTEM}.default.stream.samza.offset.default": "oldest",
        "stores.products.factory": engine,
        "stores.products.key.serde": "string",
        "stores.products.msg.serde": "json",
        "stores.products.adstore.input": f"{SYSTEM}.products",
        "job.container.count": "1",  # run(cfg) drives container "0" alone unless told
    }
    if broadcast:
        values["task.broadcast.inputs"] = f"{SYSTEM}.products#[0-{PARTITIONS - 1}]"
    if bootstrap:
        values[f"systems.{SYSTEM}.streams.products.samza.bootstrap"] = "true"
    values.update(extra)
    return Config(values)


def create(registry: SystemRegistry, *streams: str, bounded: bool = True) -> None:
    admin = registry.admin(SYSTEM)
    for stream in streams:
        admin.create_stream(StreamSpec(stream, PARTITIONS, bounded=bounded))


def produce(registry: SystemRegistry, stream: str, records, *, partition: int | None = None,
            end: bool = False) -> None:
    """Send ``(key, message)`` pairs (message None: a tombstone) with the stream's serdes; to
    ``partition`` or to every partition when None and the stream is broadcast-style
    (``products``), else by key."""
    ss = SystemStream(SYSTEM, stream)
    serdes = registry.serdes_for(ss)
    producer = registry.producer(SYSTEM)
    producer.register("test")
    producer.start()
    try:
        for i, (key, message) in enumerate(records):
            k, m = serdes.serialize(OutgoingMessageEnvelope(ss, message, key=key))
            p = partition if partition is not None else i % PARTITIONS
            producer.send("test", OutgoingMessageEnvelope(ss, m, key=k, partition=p))
        producer.flush("test")
        if end:
            producer.end_stream(stream)
    finally:
        producer.stop()


def end(registry: SystemRegistry, *streams: str) -> None:
    admin = registry.admin(SYSTEM)
    for stream in streams:
        admin.end_stream(stream)


def read(registry: SystemRegistry, stream: str) -> list:
    """Every deserialized message of ``stream`` (all partitions)."""
    ss = SystemStream(SYSTEM, stream)
    serdes = registry.serdes_for(ss)
    out = []
    consumer = registry.consumer(SYSTEM)
    ssps = [SystemStreamPartition(SYSTEM, stream, p) for p in range(PARTITIONS)]
    for ssp in ssps:
        consumer.register(ssp, 0)
    consumer.start()
    try:
        while True:
            got = consumer.poll(ssps, 0.05)
            batch = [e for es in got.values() for e in es if not e.is_end_of_stream]
            if not batch:
                break
            out.extend(serdes.deserialize(e).message for e in batch)
    finally:
        consumer.stop()
    return out


def run(cfg: Config, container_id: str = "0", **kwargs) -> Container:
    container = build(cfg, container_id, **kwargs)
    container.run()
    return container


def build(cfg: Config, container_id: str = "0", **kwargs) -> Container:
    registry = SystemRegistry(cfg)
    from weir.engine.config.streams import all_input_streams
    counts = registry.partition_counts(all_input_streams(cfg))
    model = build_job_model(cfg, counts)
    return Container(cfg, model, container_id, registry=registry,
                     progress=ProgressMode.QUIET, **kwargs)


def contents(cfg: Config, owner: str = "broadcast-container-0", store: str = "products") -> dict:
    """What the (closed) persistent adjunct store of ``owner`` holds now, served version."""
    from weir.recovery.adjunct import AdjunctStore, read_adjunct_offsets
    from weir.stores.adjunct import AdjunctSpec
    from weir.stores.spec import StoreSpec
    directory = Path(cfg["job.logged.store.base.dir"]) / store / owner
    recorded = read_adjunct_offsets(directory)
    spec = StoreSpec.from_config(cfg, store)
    s = AdjunctStore(spec, AdjunctSpec.from_config(cfg, store), directory, cfg,
                     partitions=list(recorded.offsets))
    s.open(recorded)
    try:
        with s.view().all() as it:
            return dict(it)
    finally:
        s.close()


def model_config(tmp_path: Path, **extra: str) -> Config:
    """The Versions job: a broadcast, bootstrapped, versioned store ``model`` from stream
    ``model`` (one partition) beside the products store; clicks on a thread pool."""
    values = {
        "task.broadcast.inputs": f"{SYSTEM}.products#[0-{PARTITIONS - 1}],{SYSTEM}.model#0",
        "stores.model.factory": "rocksdb",
        "stores.model.key.serde": "string",
        "stores.model.msg.serde": "json",
        "stores.model.adstore.input": f"{SYSTEM}.model",
        "stores.model.adstore.versioned": "true",
        f"systems.{SYSTEM}.streams.model.samza.bootstrap": "true",
        "job.container.thread.pool.size": "2",
        "task.max.concurrency": "2",
        "task.commit.ms": "50",
    }
    values.update(extra)
    return config(tmp_path, task="Versions", **values)


def model_version(registry: SystemRegistry, version: int, rows: int = 50, *,
                  first: int = 0, seal: bool = True) -> None:
    """Rows ``first..rows-1`` of dataset version ``version`` (plus its ``version`` row), then
    its seal marker."""
    from weir.engine.adjunct import seal_dataset
    records = [(f"w{i}", {"version": version}) for i in range(first, rows)]
    if first == 0:
        records.insert(0, ("version", version))
    produce(registry, "model", records, partition=0)
    if seal:
        seal_dataset(registry, SYSTEM, "model", [0])


def wait_for(condition, timeout: float = 60.0) -> None:
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def store_of(container: Container, name: str):
    """The adjunct store ``name`` of a started container (None before it is opened)."""
    if container.adjunct is None:
        return None
    return next(u.store for u in container.adjunct.units if u.spec.name == name)


def running(container: Container) -> tuple[threading.Thread, list[BaseException]]:
    """``container.run()`` started in a thread; the list collects what it raised (the test
    reports it)."""
    errors: list[BaseException] = []

    def run():
        try:
            container.run()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors

