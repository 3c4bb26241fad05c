"""Committing buffered writes into LMDB and growing the map: a mixin of
:class:`weir.stores.engines.lmdb.LMDBEngine`, split out to keep that module small.

It relies on the engine's slots (``_env``, ``_pending``, ``_index``, ``_readers``, ``_rtxn``,
``_rget``, ``_map_size``, ``_page_size``, ``_commit_deferred``, ``options``, ``name``,
``path``). See ``docs/ENGINES.md`` for the growth rules: double on ``MapFullError`` and retry;
double ahead of time after a commit that leaves the map more than half used; never while an
iterator or snapshot holds a read transaction (py-lmdb's ``set_mapsize`` invalidates them all).
"""

from __future__ import annotations

from typing import Any

import lmdb

from weir.stores.errors import StoreError
from weir.stores.engines._lmdb_options import MAX_MAP_SIZE

__all__ = ["CommitAndGrow"]


class CommitAndGrow:
    """One write transaction per commit, and a map that grows by itself."""

    __slots__ = ()
    _env: Any
    _pending: dict
    _index: list | None
    _readers: Any
    _rtxn: Any
    _rget: Any
    _map_size: int
    _page_size: int
    _commit_deferred: bool
    options: Any
    name: str
    path: Any

    def _auto_commit(self) -> None:
        if self._commit_deferred and self._readers:
            return  # the map is full and cannot grow until iterators/snapshots close
        self._commit(explicit=False)

    def _commit(self, *, explicit: bool) -> None:
        pending = self._pending
        if not pending:
            return
        # Key order makes LMDB's page walk sequential (~0.14 us/write cheaper, about what sorting
        # the keys costs, and much cheaper once the tree outgrows the page cache).
        order = self._index if self._index is not None else sorted(pending)
        items = [(k, pending[k]) for k in order]
        if not self._write_with_growth(items, append=False, explicit=explicit):
            self._commit_deferred = True
            return
        pending.clear()
        self._index = None
        self._commit_deferred = False
        self._renew_reader()
        self._grow_ahead()

    def _write_with_growth(self, items: list[tuple[bytes, bytes | None]], *, append: bool,
                           explicit: bool = True) -> bool:
        """Write ``items`` (sorted; ``None`` deletes) in one transaction, growing the map as
        needed. False when the map is full and cannot grow now (only if not ``explicit``)."""
        while True:
            try:
                with self._env.begin(write=True) as txn:
                    puts = [kv for kv in items if kv[1] is not None]
                    if puts:
                        txn.cursor().putmulti(puts, append=append)
                    if len(puts) != len(items):
                        delete = txn.delete
                        for key, value in items:
                            if value is None:
                                delete(key)
                return True
            except lmdb.MapFullError:
                if not self._grow(explicit=explicit):
                    return False
            except lmdb.Error as exc:
                raise StoreError(f"LMDB commit of {len(items)} writes failed at {self.path}: "
                                 f"{exc}; the writes are kept and the next flush retries",
                                 store=self.name) from exc

    def _grow(self, *, explicit: bool) -> bool:
        """Double the map after a MapFullError. False if it must wait for readers to close."""
        open_readers = len(self._readers)
        if open_readers:
            if not explicit:
                return False
            raise StoreError(
                f"the LMDB map ({self._map_size} bytes) is full and cannot grow while "
                f"{open_readers} iterator(s) or snapshot(s) are open (growing would invalidate "
                f"them); close them and flush again. The {len(self._pending)} buffered writes "
                f"are kept", store=self.name)
        cap = self.options.max_map_size_bytes
        if self._map_size >= cap:
            key = MAX_MAP_SIZE.key(store=self.name)
            raise StoreError(
                f"the LMDB map is full at {self._map_size} bytes, the cap set by {key}; raise "
                f"{key}. The {len(self._pending)} buffered writes are kept and the next flush "
                f"retries", store=self.name)
        self._resize(min(self._map_size * 2, cap))
        return True

    def _grow_ahead(self) -> None:
        """Double the map while it is more than half used, when nothing blocks growing."""
        if self._readers:
            return
        cap = self.options.max_map_size_bytes
        used = (self._env.info()["last_pgno"] + 1) * self._page_size
        target = self._map_size
        while used * 2 > target and target < cap:
            target = min(target * 2, cap)
        if target != self._map_size:
            self._resize(target)

    def _resize(self, new_size: int) -> None:
        try:
            self._rtxn.abort()
        except lmdb.Error:
            pass
        try:
            self._env.set_mapsize(new_size)
        except lmdb.Error as exc:
            raise StoreError(f"cannot grow the LMDB map of {self.path} to {new_size} bytes: "
                             f"{exc}", store=self.name) from exc
        finally:
            self._map_size = self._env.info()["map_size"]
            self._renew_reader(aborted=True)

    def _renew_reader(self, *, aborted: bool = False) -> None:
        if not aborted:
            try:
                self._rtxn.abort()
            except lmdb.Error:
                pass
        self._rtxn = self._env.begin()
        self._rget = self._rtxn.get
