"""The LMDB engine against a dict model, with iterators and snapshots held open across writes,
automatic commits (write batch of 3) and map growth (a 64 KiB map and 3 KB values).

Each open iterator must go on yielding the store as it was when the iterator was created, and
every read must merge buffered writes and deletes with committed data exactly.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from weir.stores.engines.lmdb import LMDBEngine, LMDBOptions
from weir.stores.errors import StoreError

from tests.stores._dict_model import dict_model_rules

keys = st.binary(min_size=1, max_size=2)
values = st.one_of(st.binary(max_size=4), st.just(b"x" * 3000))
bounds = st.one_of(st.none(), keys)
_OPTIONS = LMDBOptions(map_size_bytes=64 * 1024, write_batch_size=3)


class LMDBMachine(dict_model_rules(keys, values, bounds), RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="weir-lmdb-model-"))
        self.engine = LMDBEngine("s", self.root, _OPTIONS)
        self.model: dict[bytes, bytes] = {}
        self.iterators: list[tuple[object, list[tuple[bytes, bytes]]]] = []
        self.snapshots: list[tuple[object, list[tuple[bytes, bytes]]]] = []

    @property
    def subject(self):
        return self.engine

    # -- writes (put and delete are shared) --------------------------------------------------
    @rule(batch=st.lists(st.tuples(keys, st.one_of(st.none(), values)), max_size=5))
    def write_batch(self, batch):
        self.engine.write_batch(batch)
        for key, value in batch:
            if value is None:
                self.model.pop(key, None)
            else:
                self.model[key] = value

    @rule()
    def flush(self):
        try:
            self.engine.flush()
        except StoreError as exc:  # the map is full and open views keep it from growing
            assert "close them and flush again" in str(exc)
            assert self.iterators or self.snapshots

    # -- reads (get is shared) --------------------------------------------------------------
    @rule(ks=st.lists(keys, max_size=4))
    def get_all(self, ks):
        assert self.engine.get_all(ks) == {k: self.model[k] for k in ks if k in self.model}

    @rule(lo=bounds, hi=bounds)
    def whole_range(self, lo, hi):
        with self.engine.range(lo, hi) as it:
            assert list(it) == self.expected(lo, hi)

    # -- iterators held open across writes (snapshot rules are shared) ------------------------
    @precondition(lambda self: len(self.iterators) < 4)
    @rule(lo=bounds, hi=bounds)
    def open_iterator(self, lo, hi):
        self.iterators.append((self.engine.range(lo, hi), self.expected(lo, hi)))

    @precondition(lambda self: self.iterators)
    @rule(data=st.data())
    def advance_iterator(self, data):
        i = data.draw(st.integers(0, len(self.iterators) - 1))
        it, rest = self.iterators[i]
        for _ in range(data.draw(st.integers(1, 3))):
            assert next(it, None) == (rest.pop(0) if rest else None)
        if data.draw(st.booleans()):
            it.close()
            del self.iterators[i]

    @rule()
    def reopen(self):
        self.engine.close()  # closes the open views and commits the buffer
        self.iterators.clear()
        self.snapshots.clear()
        self.engine = LMDBEngine("s", self.root, _OPTIONS)

    def teardown(self):
        self.engine.close()
        shutil.rmtree(self.root, ignore_errors=True)


TestLMDBModel = LMDBMachine.TestCase
TestLMDBModel.settings = settings(max_examples=60, stateful_step_count=50, deadline=None)
