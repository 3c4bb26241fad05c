"""The job coordinator: bootstrap from a long coordinator stream, and job model fetches over HTTP.

1. **Bootstrap**: a coordinator stream of ``--messages`` (default 100,000) ``set-config``
   messages over ``--keys`` distinct keys (default 10,000; later values overwrite earlier
   ones) on the file log, written once. Each round opens a fresh
   :class:`~weir.engine.coordinator.stream.CoordinatorStreamStore` and times ``bootstrap()``
   plus reading the state (config, assignments) from it. Goal: < 1 s for 100,000 messages.
2. **Fetch**: a job with ``--tasks`` tasks (default 1,000: one input stream with that many
   partitions) over ``--containers`` containers, served by the job coordinator's endpoint.
   ``--clients`` concurrent clients (default 50: ``--procs`` processes x threads, so the
   clients do not share one interpreter), each a new connection per request as a container
   makes, fetch ``GET /`` and read the whole body, ``--requests`` times each, closed loop
   (every client sends its next request when the last answer arrived). Also a *burst*: every
   client fetches once at the same moment (containers starting together). Latency per
   request: p50, p90, p99, max. Goal: p99 < 20 ms with 50 concurrent clients.
   ``--baseline`` repeats the fetch against the standard library's ``ThreadingHTTPServer``
   serving the same bytes, against a bare asyncio protocol that answers every request with
   those bytes (the floor of any asyncio server in Python), and against waitress when it is
   installed, for the ratios.

Run (not in CI)::

    .venv/bin/python bench/coordinator.py
    .venv/bin/python bench/coordinator.py --messages 100000 --tasks 1000 --clients 50 --baseline
"""

from __future__ import annotations

import argparse
import http.client
import logging
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from weir.engine.coordinator import CoordinatorState, CoordinatorStreamStore, JobCoordinator  # noqa: E402
from weir.engine.coordinator.messages import CoordinatorMessage  # noqa: E402
from weir.engine.model import OutgoingMessageEnvelope, SystemStream  # noqa: E402
from weir.engine.systems.api import StreamSpec  # noqa: E402
from weir.engine.systems.registry import SystemRegistry  # noqa: E402
from weir.stores.config import Config  # noqa: E402


def job_config(root: Path, tasks: int, containers: int) -> Config:
    return Config({"job.name": "bench_job", "task.class": "tests.engine._jobs:PassThrough",
                   "task.inputs": "filelog.input", "systems.filelog.root": str(root / "log"),
                   "job.container.count": str(containers),
                   "job.coordinator.http.max.connections": "1024"})


# -- bootstrap --------------------------------------------------------------------------------

def bench_bootstrap(root: Path, messages: int, keys: int, rounds: int) -> None:
    config = job_config(root, 1, 1)
    store = CoordinatorStreamStore.for_job(config, source="bench")
    store.create()
    registry = SystemRegistry(config)
    producer = registry.producer("filelog")
    producer.register("bench")
    producer.start()
    ss = SystemStream("filelog", store.stream)
    started = time.perf_counter()
    for i in range(messages):
        msg = CoordinatorMessage.set_config(f"bench.key.{i % keys:06d}", f"value-{i}",
                                            source="bench")
        producer.send("bench", OutgoingMessageEnvelope(ss, msg.value_bytes(), key=msg.key_bytes(),
                                                       partition=0))
    producer.flush("bench")
    producer.stop()
    size = sum(f.stat().st_size for f in (root / "log" / store.stream / "0").glob("*.log"))
    print(f"wrote {messages:,} messages ({size / 1e6:.1f} MB) in "
          f"{time.perf_counter() - started:.2f} s")
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        with CoordinatorStreamStore.for_job(config, source="bench") as fresh:
            read = fresh.bootstrap()
            state = CoordinatorState.from_store(fresh)
        times.append(time.perf_counter() - t0)
        assert read == messages and len(state.config) == keys, (read, len(state.config))
    best, median = min(times), statistics.median(times)
    print(f"bootstrap of {messages:,} messages ({keys:,} keys): best {best:.3f} s, median "
          f"{median:.3f} s over {rounds} rounds ({messages / best:,.0f} msg/s); goal < 1 s: "
          f"{'met' if median < 1 else 'NOT met'}")


# -- fetch ------------------------------------------------------------------------------------

def _client_proc(host: str, port: int, threads: int, requests: int, barrier, out) -> None:
    latencies: list[float] = []
    lock = threading.Lock()
    errors = [0]

    def one() -> float:
        t0 = time.perf_counter()
        conn = http.client.HTTPConnection(host, port, timeout=30)
        try:
            conn.request("GET", "/")
            response = conn.getresponse()
            body = response.read()
            if response.status != 200 or not body:
                raise RuntimeError(f"HTTP {response.status}")
        finally:
            conn.close()
        return time.perf_counter() - t0

    def worker() -> None:
        barrier.wait()
        mine = []
        for _ in range(requests):
            try:
                mine.append(one())
            except Exception:  # noqa: BLE001 - counted, reported
                with lock:
                    errors[0] += 1
        with lock:
            latencies.extend(mine)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    out.put((latencies, errors[0]))


def load(host: str, port: int, clients: int, procs: int, requests: int) -> tuple[list[float], int, float]:
    ctx = multiprocessing.get_context("spawn")
    per = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    barrier = ctx.Barrier(clients + 1)
    out = ctx.Queue()
    ps = [ctx.Process(target=_client_proc, args=(host, port, n, requests, barrier, out))
          for n in per if n]
    for p in ps:
        p.start()
    barrier.wait()
    t0 = time.perf_counter()
    latencies, errors = [], 0
    for _ in ps:
        got, err = out.get()
        latencies += got
        errors += err
    elapsed = time.perf_counter() - t0
    for p in ps:
        p.join()
    return sorted(latencies), errors, elapsed


def describe(name: str, lat: list[float], errors: int, elapsed: float) -> str:
    def q(p: float) -> float:
        return lat[min(len(lat) - 1, int(len(lat) * p))] * 1000
    return (f"{name:<34} {len(lat):>6,} req  {len(lat) / elapsed:>7,.0f} req/s  p50 {q(.5):6.1f} ms"
            f"  p90 {q(.9):6.1f} ms  p99 {q(.99):6.1f} ms  max {lat[-1] * 1000:6.1f} ms"
            f"  errors {errors}")


def _stdlib_server(body: bytes):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):  # noqa: N802 - the stdlib's name
            self.send_response(200)
            self.send_header("Content-Type", "application/json;charset=UTF-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _asyncio_floor_server(body: bytes) -> tuple[int, object]:
    """The floor of any asyncio HTTP server in Python: a bare protocol that answers every
    request with the same bytes (no HTTP parsing beyond the blank line, no routing)."""
    import asyncio

    head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json;charset=UTF-8\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))

    class Answer(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport, self.seen = transport, b""

        def data_received(self, data):
            self.seen += data
            if b"\r\n\r\n" in self.seen:
                self.transport.write(head + body)
                self.transport.close()

    ready, holder = threading.Event(), {}

    def run():
        loop = asyncio.new_event_loop()
        server = loop.run_until_complete(loop.create_server(Answer, "127.0.0.1", 0))
        holder["port"], holder["loop"] = server.sockets[0].getsockname()[1], loop
        ready.set()
        loop.run_forever()

    threading.Thread(target=run, daemon=True).start()
    ready.wait()
    return holder["port"], holder["loop"]


def _waitress_server(body: bytes):
    """waitress (a pure-Python WSGI server with a thread pool), when installed."""
    from waitress.server import create_server

    logging.getLogger("waitress.queue").setLevel(logging.ERROR)

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "application/json;charset=UTF-8"),
                                  ("Content-Length", str(len(body)))])
        return [body]

    server = create_server(app, host="127.0.0.1", port=0, threads=8, connection_limit=256)
    threading.Thread(target=server.run, daemon=True).start()
    return server


def _compare(name: str, host: str, port: int, clients: int, procs: int, requests: int,
             weir_rate: float) -> None:
    load(host, port, min(clients, 4), 1, 5)
    lat, errors, elapsed = load(host, port, clients, procs, 1)
    print(describe(f"{name} burst: {clients} x 1", lat, errors, elapsed))
    lat, errors, elapsed = load(host, port, clients, procs, requests)
    print(describe(f"{name} closed loop: {clients} x {requests}", lat, errors, elapsed))
    print(f"throughput ratio coordinator / {name}: {weir_rate / (len(lat) / elapsed):.2f}x")


def bench_fetch(root: Path, tasks: int, containers: int, clients: int, procs: int,
                requests: int, baseline: bool) -> None:
    config = job_config(root, tasks, containers)
    SystemRegistry(config).admin("filelog").create_stream(StreamSpec("input", tasks))
    coordinator = JobCoordinator(config)
    coordinator.start()
    url = coordinator.serve()
    body = coordinator.snapshot.model_json
    print(f"job model of {tasks:,} tasks in {containers} containers: {len(body) / 1e3:.0f} kB")
    host, port = "127.0.0.1", int(url.rsplit(":", 1)[1])
    try:
        load(host, port, min(clients, 4), 1, 5)  # warm up
        lat, errors, elapsed = load(host, port, clients, procs, 1)
        print(describe(f"burst: {clients} clients x 1", lat, errors, elapsed))
        lat, errors, elapsed = load(host, port, clients, procs, requests)
        print(describe(f"closed loop: {clients} clients x {requests}", lat, errors, elapsed))
        weir_rate = len(lat) / elapsed
        weir_p99 = lat[int(len(lat) * .99)] * 1000
        print(f"goal p99 < 20 ms with {clients} concurrent clients: "
              f"{'met' if weir_p99 < 20 else 'NOT met'} ({weir_p99:.1f} ms)")
    finally:
        coordinator.stop()
    if not baseline:
        return
    server = _stdlib_server(body)
    try:
        _compare("stdlib ThreadingHTTPServer", host, server.server_address[1], clients, procs,
                 requests, weir_rate)
    finally:
        server.shutdown()
    port, loop = _asyncio_floor_server(body)
    try:
        _compare("bare asyncio protocol", host, port, clients, procs, requests, weir_rate)
    finally:
        loop.call_soon_threadsafe(loop.stop)
    try:
        server = _waitress_server(body)
    except ImportError:
        print("waitress is not installed: `pip install waitress` to compare with it")
        return
    try:
        _compare("waitress (8 threads)", host, server.effective_port, clients, procs, requests,
                 weir_rate)
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--containers", type=int, default=10)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--procs", type=int, default=5, help="client processes")
    parser.add_argument("--requests", type=int, default=20, help="requests per client")
    parser.add_argument("--baseline", action="store_true",
                        help="also measure the stdlib ThreadingHTTPServer serving the same bytes")
    parser.add_argument("--only", choices=("bootstrap", "fetch"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")
    root = Path(tempfile.mkdtemp(prefix="weir-bench-coord-"))
    try:
        if args.only in (None, "bootstrap"):
            bench_bootstrap(root / "b", args.messages, args.keys, args.rounds)
        if args.only in (None, "fetch"):
            bench_fetch(root / "f", args.tasks, args.containers, args.clients, args.procs,
                        args.requests, args.baseline)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
