"""A WebHDFS endpoint on loopback over a local directory, for the ``hdfs://`` storage tests.

HDFS itself cannot run here (the PySpark wheel has Hadoop's client jars, not the NameNode or
DataNode), so this serves the part of the WebHDFS REST API Weir's client uses, with HDFS's
semantics where they matter to Weir (Hadoop's WebHDFS REST API documentation):

* ``CREATE`` is two steps: the NameNode answers ``307`` with the DataNode's ``Location``, the
  data goes there; ``overwrite=false`` on an existing file is ``403
  FileAlreadyExistsException``;
* ``RENAME`` never replaces: an existing destination (or a missing source) answers
  ``{"boolean": false}``; namespace operations run one at a time, as under the NameNode's lock;
* ``GETFILESTATUS`` / ``LISTSTATUS`` / ``OPEN`` / ``DELETE`` / ``MKDIRS`` as documented, a
  missing path ``404 FileNotFoundException``.

``lose_rename_response(n)`` makes the next ``n`` renames happen and then drops the connection
without an answer (a lost response); ``requests`` counts the requests served by operation
(a DataNode's part of ``CREATE`` as ``CREATE@datanode``).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import shutil
import socket
import threading
from pathlib import Path
from urllib.parse import parse_qs

__all__ = ["WebHdfsServer", "start_webhdfs"]

_PREFIX = "/webhdfs/v1"


class WebHdfsServer:
    def __init__(self, root: Path):
        self.root = root
        self.lock = threading.Lock()
        self.lose_renames = 0
        self.requests: collections.Counter[str] = collections.Counter()
        self._server = None
        self.port = 0

    # -- helpers ---------------------------------------------------------------------------
    def _local(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    @staticmethod
    def _json(start_response, status: str, body: dict) -> list[bytes]:
        data = json.dumps(body).encode()
        start_response(status, [("Content-Type", "application/json"),
                                ("Content-Length", str(len(data)))])
        return [data]

    def _missing(self, start_response, path: str) -> list[bytes]:
        return self._json(start_response, "404 Not Found", {"RemoteException": {
            "exception": "FileNotFoundException", "message": f"File does not exist: {path}"}})

    @staticmethod
    def _status(p: Path, suffix: str) -> dict:
        st = p.stat()
        return {"pathSuffix": suffix, "type": "DIRECTORY" if p.is_dir() else "FILE",
                "length": 0 if p.is_dir() else st.st_size,
                "modificationTime": int(st.st_mtime * 1000), "replication": 1}

    # -- the app ---------------------------------------------------------------------------
    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if not path.startswith(_PREFIX):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not webhdfs"]
        path = path[len(_PREFIX):] or "/"
        q = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        op, method = q.get("op", ""), environ["REQUEST_METHOD"]
        local = self._local(path)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        with self.lock:
            self.requests[op + ("@datanode" if q.get("datanode") == "true" else "")] += 1
            if op == "CREATE" and method == "PUT":
                if q.get("datanode") != "true":           # the NameNode: redirect
                    location = (f"http://127.0.0.1:{self.port}{_PREFIX}{path}?"
                                f"{environ.get('QUERY_STRING', '')}&datanode=true")
                    start_response("307 Temporary Redirect", [("Location", location),
                                                              ("Content-Length", "0")])
                    return [b""]
                if local.exists() and q.get("overwrite", "false") != "true":
                    return self._json(start_response, "403 Forbidden", {"RemoteException": {
                        "exception": "FileAlreadyExistsException",
                        "message": f"{path} for client already exists"}})
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_bytes(body)
                start_response("201 Created", [("Location", f"hdfs://{path}"),
                                               ("Content-Length", "0")])
                return [b""]
            if op == "OPEN" and method == "GET":
                if not local.is_file():
                    return self._missing(start_response, path)
                data = local.read_bytes()
                offset = int(q.get("offset", 0))
                end = offset + int(q["length"]) if "length" in q else len(data)
                chunk = data[offset:end]
                start_response("200 OK", [("Content-Type", "application/octet-stream"),
                                          ("Content-Length", str(len(chunk)))])
                return [chunk]
            if op == "GETFILESTATUS":
                if not local.exists():
                    return self._missing(start_response, path)
                return self._json(start_response, "200 OK",
                                  {"FileStatus": self._status(local, "")})
            if op == "LISTSTATUS":
                if not local.exists():
                    return self._missing(start_response, path)
                entries = [self._status(c, c.name) for c in sorted(local.iterdir())] \
                    if local.is_dir() else [self._status(local, "")]
                return self._json(start_response, "200 OK",
                                  {"FileStatuses": {"FileStatus": entries}})
            if op == "RENAME" and method == "PUT":
                target = self._local(q["destination"])
                ok = local.exists() and not target.exists() and target.parent.is_dir()
                if ok:
                    os.rename(local, target)
                if self.lose_renames > 0:
                    self.lose_renames -= 1
                    sock = environ.get("werkzeug.socket")
                    if sock is not None:
                        sock.shutdown(socket.SHUT_RDWR)
                        sock.close()
                    return []
                return self._json(start_response, "200 OK", {"boolean": ok})
            if op == "DELETE" and method == "DELETE":
                if not local.exists():
                    return self._json(start_response, "200 OK", {"boolean": False})
                if local.is_dir():
                    if q.get("recursive") != "true" and any(local.iterdir()):
                        return self._json(start_response, "403 Forbidden", {"RemoteException": {
                            "exception": "PathIsNotEmptyDirectoryException",
                            "message": f"{path} is non empty"}})
                    shutil.rmtree(local)
                else:
                    local.unlink()
                return self._json(start_response, "200 OK", {"boolean": True})
            if op == "MKDIRS" and method == "PUT":
                local.mkdir(parents=True, exist_ok=True)
                return self._json(start_response, "200 OK", {"boolean": True})
        return self._json(start_response, "400 Bad Request", {"RemoteException": {
            "exception": "UnsupportedOperationException", "message": f"{method} {op}"}})

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> "WebHdfsServer":
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)   # no line per request
        self._server = make_server("127.0.0.1", 0, self, threaded=True)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()

    def lose_rename_response(self, count: int = 1) -> None:
        with self.lock:
            self.lose_renames = count

    def conf(self) -> dict[str, str]:
        """The Hadoop key a Spark team sets for the NameNode's HTTP endpoint."""
        return {"spark.hadoop.dfs.namenode.http-address": f"127.0.0.1:{self.port}"}


def start_webhdfs(root: Path) -> WebHdfsServer:
    root.mkdir(parents=True, exist_ok=True)
    return WebHdfsServer(root).start()
