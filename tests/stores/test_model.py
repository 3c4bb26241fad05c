"""Model-based test: random operation sequences against every engine x stack and a dict model.

The model is a dict plus ``sorted()``; ranges, prefixes and snapshots are checked against it.
Persistent engines also flush, close and reopen in the middle of a sequence. At the end of every
sequence of a logged stack, the changelog replayed into a dict must equal the model.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from weir.stores.engines._base import prefix_upper_bound

from tests.stores._dict_model import dict_model_rules
from tests.stores.stacks import ENGINES, STACKS, StoreFactory, engine_available

EDGE_KEYS = [b"\x00", b"a", b"a\x00", b"a\xff", b"a\xff\xff", b"ab", b"b", b"\x7f", b"\x80",
             b"\xff", b"\xff\x00", b"\xff\xff"]
keys = st.one_of(st.sampled_from(EDGE_KEYS), st.binary(min_size=1, max_size=3))
values = st.binary(max_size=6)
bounds = st.one_of(st.none(), keys)


def _items(it):
    with it:
        return list(it)


class StoreMachine(dict_model_rules(keys, values, bounds), RuleBasedStateMachine):
    engine = "memory"
    stack = "raw"

    def __init__(self):
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="weir-model-"))
        self.factory = StoreFactory(self.engine, self.stack, self.root)
        self.store = self.factory.open()
        self.model: dict[bytes, bytes] = {}
        self.snapshots: list[tuple[object, list[tuple[bytes, bytes]]]] = []

    @property
    def subject(self):
        return self.store

    # -- writes (put and delete are shared) ----------------------------------------------------
    @rule(pairs=st.lists(st.tuples(keys, values), max_size=6))
    def put_all(self, pairs):
        self.store.put_all(pairs)
        self.model.update(pairs)

    @rule(ks=st.lists(keys, max_size=6))
    def delete_all(self, ks):
        self.store.delete_all(ks)
        for k in ks:
            self.model.pop(k, None)

    @rule(batch=st.lists(st.tuples(keys, st.one_of(st.none(), values)), max_size=6))
    def write_batch(self, batch):
        self.store.write_batch(batch)
        for k, v in batch:
            if v is None:
                self.model.pop(k, None)
            else:
                self.model[k] = v

    # -- reads (get is shared) -----------------------------------------------------------------
    @rule(ks=st.lists(keys, max_size=6))
    def get_all(self, ks):
        assert self.store.get_all(ks) == {k: self.model[k] for k in ks if k in self.model}

    @rule(lo=bounds, hi=bounds)
    def range(self, lo, hi):
        assert _items(self.store.range(lo, hi)) == self.expected(lo, hi)

    @rule(p=keys)
    def prefix(self, p):
        assert _items(self.store.prefix(p)) == self.expected(p, prefix_upper_bound(p))

    @rule()
    def all(self):
        assert _items(self.store.all()) == self.expected(None, None)

    # -- lifecycle (snapshot rules are shared) -----------------------------------------------------------------------------
    @rule()
    def flush(self):
        self.store.flush()

    @precondition(lambda self: self.factory.persistent)
    @rule()
    def reopen(self):
        for snap, _ in self.snapshots:
            snap.close()
        self.snapshots.clear()
        self.store = self.factory.reopen(self.store)

    @invariant()
    def still_open(self):
        assert not self.store.closed

    def teardown(self):
        try:
            for snap, _ in self.snapshots:
                snap.close()
            self.store.flush()
            if self.factory.logged:
                log = self.factory.changelog
                replayed: dict[bytes, bytes] = {}
                for _, k, v in log.read(log.oldest_offset(), log.newest_offset()):
                    if v is None:
                        replayed.pop(k, None)
                    else:
                        replayed[k] = v
                assert replayed == self.model
        finally:
            self.factory.close_all()
            shutil.rmtree(self.root, ignore_errors=True)


def _machine(engine: str, stack: str):
    cls = type(f"StoreMachine_{engine}_{stack.replace('+', '_')}", (StoreMachine,),
               {"engine": engine, "stack": stack})
    case = cls.TestCase
    if engine != "memory":
        # Opening, flushing and closing a real database costs milliseconds: fewer, shorter runs.
        case.settings = settings(case.settings, max_examples=min(case.settings.max_examples, 12),
                                 stateful_step_count=30)
    return case


for _engine in ENGINES:
    for _stack in STACKS:
        _case = _machine(_engine, _stack)
        if not engine_available(_engine):
            _case = pytest.mark.skip(reason=f"engine {_engine} is not importable yet")(_case)
        globals()[f"TestModel_{_engine}_{_stack.replace('+', '_')}"] = _case
