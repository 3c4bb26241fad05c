"""A real S3-compatible HTTP server on loopback for the object-store tests: moto's S3 in server
mode, in a process of its own (``python -m tests.engine.spark._s3server``), one per test session.

Two things are added around moto's WSGI app, both about the server, not the client:

* **Requests are served one at a time.** moto checks ``If-None-Match: *`` and then stores the
  object in two steps, and its threaded server runs requests side by side, so two racing
  conditional PUTs could both pass the check -- real S3 (and GCS, ADLS) decides a conditional
  write atomically. Serialising requests gives moto the same atomicity.
* **Counting and faults**, through paths no S3 client uses (``_weir`` is not a valid bucket):
  ``GET /_weir/requests`` returns the requests served so far by operation (``PUT``, ``GET``,
  ``HEAD``, ``LIST``, ``DELETE``, ``POST``); ``POST /_weir/reset`` zeroes them;
  ``POST /_weir/lose-response?key=K&count=N`` makes the server carry out the next ``N`` PUTs of
  key ``K`` (the object is stored) and then close the connection without answering: the
  client sees a lost response and retries.

The process prints ``PORT <n>`` on its first line once it serves, and exits when its standard
input closes (so it never outlives the test session).
"""

from __future__ import annotations

import collections
import json
import socket
import sys
import threading
import urllib.request
from urllib.parse import parse_qs, unquote

__all__ = ["S3Server", "start_s3_server"]


def _operation(environ) -> str:
    method = environ["REQUEST_METHOD"]
    path = environ.get("PATH_INFO", "")
    if method == "GET" and path.strip("/").count("/") == 0:
        return "LIST"
    return method


class _Wrapped:
    """moto's app served one request at a time, with counters and armed faults."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.counts: collections.Counter[str] = collections.Counter()
        self.lose: dict[str, int] = {}

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_weir/"):
            return self._control(environ, start_response, path)
        with self.lock:
            op = _operation(environ)
            self.counts[op] += 1
            key = unquote(path.lstrip("/"))
            lose = environ["REQUEST_METHOD"] == "PUT" and self.lose.get(key, 0) > 0
            if lose:
                self.lose[key] -= 1
                status: list[str] = []
                body = b"".join(self.app(environ, lambda s, h, e=None: status.append(s)))
                del body  # carried out, then the answer is lost
                sock = environ.get("werkzeug.socket")
                if sock is not None:
                    sock.shutdown(socket.SHUT_RDWR)
                    sock.close()
                return []
            return [b"".join(self.app(environ, start_response))]

    def _control(self, environ, start_response, path):
        query = parse_qs(environ.get("QUERY_STRING", ""))
        with self.lock:
            if path == "/_weir/requests":
                body = json.dumps(dict(self.counts)).encode()
            elif path == "/_weir/reset":
                self.counts.clear()
                body = b"{}"
            elif path == "/_weir/lose-response":
                self.lose[query["key"][0]] = int(query.get("count", ["1"])[0])
                body = b"{}"
            else:
                start_response("404 Not Found", [("Content-Type", "text/plain")])
                return [b"unknown control path"]
        start_response("200 OK", [("Content-Type", "application/json"),
                                  ("Content-Length", str(len(body)))])
        return [body]


def _serve() -> None:
    from werkzeug.serving import make_server

    from moto.moto_server.werkzeug_app import (DomainDispatcherApplication, MotoRequestHandler,
                                               create_backend_app)

    app = _Wrapped(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"PORT {server.server_address[1]}", flush=True)
    sys.stdin.read()  # until the test session closes our stdin
    server.shutdown()


class S3Server:
    """Handle on the server process: endpoint, credentials, a bucket, counters, faults."""

    region = "us-east-1"
    key = "weir-test-key"
    secret = "weir-test-secret"

    def __init__(self, process, port: int):
        self.process = process
        self.port = port
        self.endpoint = f"http://127.0.0.1:{port}"

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.region,
                            aws_access_key_id=self.key, aws_secret_access_key=self.secret)

    def bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def spark_conf(self) -> dict[str, str]:
        """The Hadoop S3A keys a Spark team sets for this endpoint (Weir reads the same)."""
        return {"spark.hadoop.fs.s3a.endpoint": self.endpoint,
                "spark.hadoop.fs.s3a.access.key": self.key,
                "spark.hadoop.fs.s3a.secret.key": self.secret,
                "spark.hadoop.fs.s3a.endpoint.region": self.region,
                "spark.hadoop.fs.s3a.path.style.access": "true"}

    def options(self):
        """Weir's storage options for this server, parsed from :meth:`spark_conf`."""
        from weir.engine.spark.storage import StorageOptions

        return StorageOptions.from_mapping(self.spark_conf())

    def _call(self, path: str, method: str = "GET") -> dict:
        req = urllib.request.Request(self.endpoint + path, method=method)
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def requests(self) -> dict[str, int]:
        return self._call("/_weir/requests")

    def reset(self) -> None:
        self._call("/_weir/reset", "POST")

    def lose_response(self, bucket: str, key: str, count: int = 1) -> None:
        from urllib.parse import quote

        self._call(f"/_weir/lose-response?key={quote(bucket + '/' + key)}&count={count}",
                   "POST")

    def stop(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=20)
        except Exception:  # noqa: BLE001 - then it is killed
            self.process.kill()
            self.process.wait()


def start_s3_server() -> S3Server:
    import subprocess
    from pathlib import Path

    repo = str(Path(__file__).resolve().parents[3])
    process = subprocess.Popen([sys.executable, "-m", "tests.engine.spark._s3server"],
                               cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline() if process.stdout else ""
    if not line.startswith("PORT "):
        process.kill()
        raise RuntimeError(f"the moto S3 server did not start (printed {line!r})")
    return S3Server(process, int(line.split()[1]))


if __name__ == "__main__":
    _serve()
