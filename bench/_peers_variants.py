"""The variants bench/peers_e2e.py runs, each as a whole process: Weir's jobs over the file
log (their input written once by :func:`generate`, their job files by :func:`job_file`), the
peers (:func:`child`, the jobs of bench/_peer_jobs.py) and the machine's ceiling
(:func:`ceiling`). :func:`run_variant` runs and times one; :func:`missing_peers` names the
peers this interpreter cannot import."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench._peers_runner import HERE, Run, timed

__all__ = ["STREAM", "PARTITIONS", "WEIR", "PEERS", "CEILING", "VARIANTS", "PEER_MODULE",
           "JSON_JOB", "log_config", "generate", "job_file", "run_variant", "child", "ceiling",
           "missing_peers"]

SCRIPT = HERE / "peers_e2e.py"
"""The benchmark's command: a peer or a ceiling runs as ``SCRIPT --child`` / ``--ceiling``."""
STREAM = "e2e-in"
PARTITIONS = 4

WEIR = {"weir-rocksdb-1": ("rocksdb", "1"), "weir-rocksdb-auto": ("rocksdb", "auto"),
        "weir-lmdb-1": ("lmdb", "1"), "weir-lmdb-auto": ("lmdb", "auto")}
PEERS = ("bytewax-b1000", "quix-txn1000", "quix-txn100k", "rocksdict-hand")
CEILING = ("ceiling-1", "ceiling-2")
VARIANTS = (*WEIR, *PEERS, *CEILING)
PEER_MODULE = {"bytewax-b1000": "bytewax", "quix-txn1000": "quixstreams",
                "quix-txn100k": "quixstreams", "rocksdict-hand": "rocksdict"}


def log_config(log_root: Path) -> dict[str, str]:
    return {"systems.filelog.factory": "filelog", "systems.filelog.root": str(log_root),
            "systems.filelog.default.stream.samza.offset.default": "oldest"}


def generate(log_root: Path, n: int, keys: int, payload: str = "bytes") -> None:
    """The job's input: ``n`` events in ``STREAM`` (4 partitions, bounded), key index modulo 4
    picks the partition, so every key lives in one task. The record's key is the key's bytes;
    its value 8 bytes (``bytes``) or the event's JSON line (``json``). Skipped when already
    there."""
    done = log_root / f".{STREAM}.done"
    if done.exists() and done.read_text() == f"{n} {keys} {payload}":
        return
    import random

    from bench._peer_jobs import json_line, key_name
    from weir.engine.model import OutgoingMessageEnvelope, SystemStream
    from weir.engine.systems.api import StreamSpec
    from weir.engine.systems.registry import SystemRegistry
    from weir.stores.config import Config

    shutil.rmtree(log_root, ignore_errors=True)
    registry = SystemRegistry(Config(log_config(log_root)))
    registry.admin("filelog").create_stream(StreamSpec(STREAM, PARTITIONS, bounded=True))
    producer = registry.producer("filelog")
    producer.register("bench")
    producer.start()
    ss = SystemStream("filelog", STREAM)
    rng = random.Random(12345)
    fmt = key_name(keys).encode()
    value = b"v" * 8
    send = producer.send
    as_json = payload == "json"
    for e in range(n):
        i = rng.randrange(keys)
        key = fmt % i
        send("bench", OutgoingMessageEnvelope(
            ss, json_line(key.decode(), e) if as_json else value, key=key,
            partition=i % PARTITIONS))
    producer.end_stream(STREAM)
    producer.stop()
    done.write_text(f"{n} {keys} {payload}")


JSON_JOB = {"task.class": "bench._job_tasks:CountJson",
             "systems.filelog.samza.key.serde": "string",
             "systems.filelog.samza.msg.serde": "json",
             "stores.counts.key.serde": "string"}


def job_file(log_root: Path, run: Path, engine: str, extra: dict[str, str] | None = None) -> Path:
    """The benchmark's Weir job in ``run``: ``bench._job_tasks:Count`` over ``STREAM``, store
    ``counts`` on ``engine`` with a changelog on the file log, ``extra`` keys over it."""
    cfg = log_config(log_root) | {
        "job.name": f"e2e-{run.name}", "task.class": "bench._job_tasks:Count",
        "task.inputs": f"filelog.{STREAM}",
        "job.data.dir": str(run / "data"),
        "stores.counts.factory": engine, "stores.counts.key.serde": "bytes",
        "stores.counts.msg.serde": "int64",
        "stores.counts.changelog": f"filelog.{run.name}-changelog",
    } | (extra or {})
    path = run / "job.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
    return path


def run_variant(name: str, work: Path, log_root: Path, n: int, keys: int,
                snapshots: dict[str, Path] | None = None, payload: str = "bytes") -> Run:
    """One whole-process run; ``name@rev`` runs Weir variant ``name`` as of ``rev``."""
    run = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    name, _, rev = name.partition("@")
    weir_path = (snapshots or {}).get(rev) if rev else None
    try:
        if name in WEIR:
            engine, count = WEIR[name]
            extra = JSON_JOB if payload == "json" else None
            cmd = [sys.executable, "-m", "weir", "run",
                   str(job_file(log_root, run, engine, extra)), "--status", "off"]
            if count is not None:
                cmd += ["--set", f"job.container.count={count}"]
        elif name in CEILING:
            cmd = [sys.executable, str(SCRIPT), "--ceiling",
                   name.rpartition("-")[2], "--n", str(n), "--keys", str(keys),
                   "--payload", payload]
        else:
            cmd = [sys.executable, str(SCRIPT), "--child", name, "--n", str(n),
                   "--keys", str(keys), "--workdir", str(run), "--payload", payload]
        return timed(cmd, work / f"{name}{'@' + rev if rev else ''}-{payload}.log", weir_path)
    finally:
        shutil.rmtree(run, ignore_errors=True)
        shutil.rmtree(log_root / f"{run.name}-changelog", ignore_errors=True)


def child(name: str, n: int, keys: int, work: Path, payload: str = "bytes") -> None:
    """One peer's whole run, in this process (called with ``--child``)."""
    from bench._peer_jobs import (Payload, bytewax_job, event_keys, event_lines, quix_job,
                                  rocksdict_job)

    kind = Payload(payload)
    events = event_lines(n, keys) if kind is Payload.JSON else event_keys(n, keys)
    if name == "bytewax-b1000":
        bytewax_job(1000, kind)(events)
    elif name in ("quix-txn1000", "quix-txn100k"):
        run, close, _ = quix_job(work / "quix", 1000 if name == "quix-txn1000" else 100_000,
                                 kind)
        run(events)
        close()
    elif name == "rocksdict-hand":
        rocksdict_job(work / "hand", 1000, kind)(events)
    else:
        raise SystemExit(f"unknown peer {name!r}; one of {', '.join(PEERS)}")


def missing_peers(names: list[str]) -> dict[str, str]:
    """The peers among ``names`` whose package this interpreter cannot import, each with one
    line saying why and how to install it (the run goes on without them, and says so in its
    report)."""
    out = {}
    for name in names:
        module = PEER_MODULE.get(name)
        if module is None:
            continue
        probe = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                               text=True)
        if probe.returncode != 0:
            reason = (probe.stderr.strip().splitlines() or ["?"])[-1]
            out[name] = (f"{name} not run: {module} is not importable in {sys.executable} "
                         f"({reason}); install the peers with .venv/bin/pip install -e "
                         f"'.[peers]'")
    return out


def ceiling(processes: int, n: int, keys: int, payload: str) -> None:
    """``ceiling-<processes>``, in this process (called with ``--ceiling``)."""
    from bench._peer_jobs import Payload, ceiling_job

    ceiling_job(processes, n, keys, Payload(payload))
