"""Restore worker processes: bulk replays that use more than one core.

CPython runs one thread of Python at a time, so restore threads alone cannot use a second
core for the per-record work of a replay (parsing, de-duplicating, sorting). When a store's
changelog can be read from another process (a file-log changelog: its source's
``bulk_reader()``) and the replay is large, the restore thread hands the replay to one of
these worker processes:

* sorted files (:func:`sorted_files_job`, RocksDB): the worker reads a range of the changelog,
  builds de-duplicated sorted runs and writes each as a file (an SST file: the engine's
  ``write_sorted_file``) into a staging directory beside the store; the restore thread
  ingests the files, in order, into the store it has open. A large range is split at segment
  boundaries over several workers.
* sorted runs (:func:`sorted_files_job` too, LMDB): the same, but the runs are written as run
  files (:func:`~weir.recovery.bulk.write_run_file`), which the restore thread loads into
  the open store with the engine's bulk load (LMDB: ``putmulti``, append mode for the first
  run into an empty store), each part as soon as its worker is done.
* fill before open (:func:`fill_job`, engines that register it): before the store is opened, the worker opens the
  (empty, rebuilt) store directory itself, loads the runs and closes it; the restore thread
  then opens the filled store.

Which one an engine gets is its registered
:attr:`~weir.stores.engines.registry.StoreEngine.worker_restore` (docs/ENGINES.md).

The pool (:class:`RestoreWorkers`) starts its processes with *spawn* from the thread that
creates it and ties their lives to the container's: each worker asks the kernel to kill it
when its parent dies (``PR_SET_PDEATHSIG`` on Linux) and also exits as soon as its parent
process is gone, so a SIGKILLed container never leaves a worker writing into a store
directory. A worker that dies fails every job still pending (:class:`RestoreWorkerError`);
the restore then fails as any restore failure does (the old files are put back).

Errors cross the process boundary as plain values: a damaged changelog record becomes
:class:`WorkerChangelogError` (offset, file, byte position), anything else
:class:`RestoreWorkerError` with the original type and message.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weir.recovery.bulk import RunBuilder, load_run, write_run_file
from weir.stores.engines.registry import Durability, WorkerRestore

if TYPE_CHECKING:  # pragma: no cover - types only (a worker imports the spec when it unpickles one)
    from weir.stores.spec import StoreSpec

__all__ = ["RestoreWorkers", "RestoreWorkerError", "WorkerChangelogError", "SstResult",
           "FillResult", "sorted_files_job", "fill_job"]

_log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


class RestoreWorkerError(Exception):
    """A restore worker failed (``kind``: the original exception type) or died."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message

    def __reduce__(self) -> tuple:
        return (type(self), (self.kind, self.message))


class WorkerChangelogError(Exception):
    """Reading the changelog failed in a worker: what restore needs to report the damage."""

    def __init__(self, kind: str, message: str, offset: int | None, exact: bool,
                 path: str | None, position: int | None):
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message
        self.offset, self.exact, self.path, self.position = offset, exact, path, position

    def __reduce__(self) -> tuple:
        return (type(self), (self.kind, self.message, self.offset, self.exact, self.path,
                             self.position))


@dataclass(frozen=True)
class SstResult:
    """What a :func:`sorted_files_job` built: files in ingest order, and what it read."""

    files: tuple[str, ...]
    records: int
    nbytes: int


@dataclass(frozen=True)
class FillResult:
    records: int
    nbytes: int


# -- the jobs (run in a worker process) -----------------------------------------------------

class _Reading:
    """Iterates a reader's batches (stored into ``into``), turning a failure into
    :class:`WorkerChangelogError`."""

    def __init__(self, reader: Callable[..., Any], start: int, end: int, into: dict):
        self.batches = reader(start, end, into=into)
        self.next_offset = start

    def __iter__(self) -> "_Reading":
        return self

    def __next__(self) -> Any:
        try:
            batch = next(self.batches)
        except StopIteration:
            raise
        except Exception as exc:
            raise _changelog_error(exc, self.next_offset) from None
        self.next_offset = batch.last + 1
        return batch


def _changelog_error(exc: BaseException, offset: int) -> WorkerChangelogError:
    exact_offset = getattr(exc, "offset", None)
    exact = isinstance(exact_offset, int)
    path = getattr(exc, "path", None)
    position = getattr(exc, "position", None)
    return WorkerChangelogError(type(exc).__name__, str(exc),
                                exact_offset if exact else offset, exact,
                                str(path) if path is not None else None,
                                position if isinstance(position, int) else None)


def sorted_files_job(reader: Callable[[int, int], Any], start: int, end: int, staging: str,
                     spec: StoreSpec, budget_bytes: int, drop_first_tombstones: bool, name: str,
                     report: Callable[[int, int, int], None]) -> SstResult:
    """Read ``[start, end]`` and write it as sorted, de-duplicated files, one per run of
    about ``budget_bytes``, in ``staging``: ``<name>-<n>.sst`` files of ``spec``'s engine (its
    ``write_sorted_file``) for ``WorkerRestore.SORTED_FILES``, ``<name>-<n>.run`` run files
    (:func:`~weir.recovery.bulk.write_run_file`) for ``WorkerRestore.SORTED_RUNS``."""
    if spec.engine.worker_restore is WorkerRestore.SORTED_FILES:
        write_native = spec.engine.write_sorted_file
        assert write_native is not None, f"engine {spec.engine.name} writes no sorted files"
        suffix = "sst"

        def write_sorted_file(path: str, keys: list, values: list, deletes: bool) -> None:
            write_native(path, keys, values, spec.options, deletes=deletes)
    else:
        suffix = "run"

        def write_sorted_file(path: str, keys: list, values: list, deletes: bool) -> None:
            write_run_file(path, keys, values, deletes=deletes)
    builder = RunBuilder()
    files: list[str] = []
    records = nbytes = 0
    drop = drop_first_tombstones

    def write_run() -> None:
        nonlocal drop
        keys, values, deletes = builder.take(drop_tombstones=drop)
        drop = False
        if keys:
            path = str(Path(staging) / f"{name}-{len(files):04d}.{suffix}")
            write_sorted_file(path, keys, values, deletes)
            files.append(path)

    for batch in _Reading(reader, start, end, builder.pairs):
        builder.add(batch)
        records += batch.records
        nbytes += batch.nbytes
        report(batch.last, batch.records, batch.nbytes)
        if builder.pending_bytes >= budget_bytes:
            write_run()
    if len(builder):
        write_run()
    return SstResult(tuple(files), records, nbytes)


def fill_job(reader: Callable[[int, int], Any], start: int, end: int, directory: str,
             spec: StoreSpec, budget_bytes: int,
             report: Callable[[int, int, int], None]) -> FillResult:
    """Open the empty store of ``spec`` in ``directory`` with its engine (taking its lock),
    load ``[start, end]`` in runs, flush and close it."""
    engine = spec.engine.open(spec, Path(directory), Durability.CHANGELOG)
    try:
        builder = RunBuilder()
        records = nbytes = 0
        first = True
        for batch in _Reading(reader, start, end, builder.pairs):
            builder.add(batch)
            records += batch.records
            nbytes += batch.nbytes
            report(batch.last, batch.records, batch.nbytes)
            if builder.pending_bytes >= budget_bytes:
                keys, values, deletes = builder.take(drop_tombstones=first)
                load_run(engine, keys, values, deletes=deletes)
                first = False
        if len(builder):
            keys, values, deletes = builder.take(drop_tombstones=first)
            load_run(engine, keys, values, deletes=deletes)
        engine.flush()
    finally:
        engine.close()
    return FillResult(records, nbytes)


# -- the worker process ---------------------------------------------------------------------

def _die_with_parent(parent: int) -> None:
    """Exit when the container process dies: the kernel's parent-death signal where there is
    one, and a watcher thread in any case (the signal is tied to the thread that started this
    process)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(3)

    def watch() -> None:
        while True:
            time.sleep(0.1)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, name="weir-restore-parent-watch", daemon=True).start()


def _worker_main(jobs: Any, results: Any, parent: int) -> None:
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the container decides when to stop
    while True:
        item = jobs.get()
        if item is None:
            return
        job_id, fn, args = item

        def report(last: int, records: int, nbytes: int, job_id: int = job_id) -> None:
            results.put(("progress", job_id, (last, records, nbytes)))

        try:
            result = fn(*args, report=report)
        except WorkerChangelogError as exc:
            results.put(("failed", job_id, exc))
        except BaseException as exc:  # noqa: BLE001 - reported to the restore thread
            results.put(("failed", job_id, RestoreWorkerError(type(exc).__name__, str(exc))))
        else:
            results.put(("done", job_id, result))


class RestoreWorkers:
    """A pool of ``processes`` restore worker processes (see the module docstring).

    ``submit(fn, *args, progress=callback)`` runs ``fn(*args, report=...)`` in a worker and
    returns a :class:`~concurrent.futures.Future`; ``progress(last, records, nbytes)`` is
    called (in the pool's dispatcher thread) for every batch the job reads. Use as a context
    manager, or call :meth:`close`.
    """

    def __init__(self, processes: int):
        if processes < 1:
            raise ValueError(f"a restore worker pool needs at least one process, got {processes}")
        import multiprocessing  # here: a restore without workers never starts one

        ctx = multiprocessing.get_context("spawn")
        self.size = processes
        self._jobs = ctx.Queue()
        self._results = ctx.Queue()
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[Future, Callable | None]] = {}
        self._next_id = 0
        self._closed = False
        self._broken: str | None = None
        self._procs = [ctx.Process(target=_worker_main, name=f"weir-restore-worker-{i}",
                                   args=(self._jobs, self._results, os.getpid()), daemon=True)
                       for i in range(processes)]
        for proc in self._procs:
            proc.start()
        self._dispatcher = threading.Thread(target=self._dispatch, name="weir-restore-dispatch",
                                            daemon=True)
        self._dispatcher.start()

    def submit(self, fn: Callable[..., Any], *args: Any,
               progress: Callable[[int, int, int], None] | None = None) -> Future:
        future: Future = Future()
        with self._lock:
            if self._closed or self._broken:
                raise RestoreWorkerError("RestoreWorkers", self._broken or "the pool is closed")
            job_id = self._next_id
            self._next_id += 1
            self._pending[job_id] = (future, progress)
        self._jobs.put((job_id, fn, args))
        return future

    def _dispatch(self) -> None:
        while True:
            try:
                kind, job_id, payload = self._results.get(timeout=0.25)
            except queue.Empty:
                if self._closed and not self._pending:
                    return
                self._check_alive()
                continue
            except (EOFError, OSError):
                self._fail_pending("the restore workers' result queue closed")
                return
            except Exception as exc:  # noqa: BLE001 - a result that cannot be read
                self._fail_pending(f"a result of a restore worker could not be read: "
                                   f"{type(exc).__name__}: {exc}")
                return
            with self._lock:
                entry = self._pending.get(job_id)
            if entry is None:
                continue
            future, progress = entry
            if kind == "progress":
                if progress is not None:
                    try:
                        progress(*payload)
                    except Exception:  # noqa: BLE001 - progress output never fails a restore
                        _log.exception("restore progress callback failed")
                continue
            with self._lock:
                self._pending.pop(job_id, None)
            if kind == "done":
                future.set_result(payload)
            else:
                future.set_exception(payload)

    def _check_alive(self) -> None:
        dead = [p for p in self._procs if not p.is_alive()]
        if not dead or self._closed:
            return
        why = ", ".join(f"{p.name} (exit code {p.exitcode})" for p in dead)
        self._fail_pending(f"restore worker process(es) died: {why}", "RestoreWorkerDied")

    def _fail_pending(self, why: str, kind: str = "RestoreWorkers") -> None:
        """The pool cannot finish its jobs: fail every pending one (never leave a restore
        thread waiting forever)."""
        with self._lock:
            self._broken = why
            pending, self._pending = self._pending, {}
        for future, _ in pending.values():
            future.set_exception(RestoreWorkerError(kind, why))

    def close(self) -> None:
        """Stop the workers (after the jobs already submitted) and the dispatcher."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for _ in self._procs:
            try:
                self._jobs.put(None)
            except (OSError, ValueError):
                break
        for proc in self._procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self._dispatcher.join(timeout=5)
        self._jobs.close()
        self._results.close()

    def __enter__(self) -> "RestoreWorkers":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
