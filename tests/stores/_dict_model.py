"""The dict model and the rules shared by the model-based store tests.

``test_model.py`` (every engine x stack) and ``engines/test_lmdb_model.py`` (LMDB with views
held open across writes) check a store against a dict plus ``sorted()``. The rules both run
the same way live here; each machine binds them to its own key and value strategies and names
the object under test with a ``subject`` property.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

__all__ = ["dict_model_rules", "expected_items"]


def expected_items(model: dict[bytes, bytes], lo: bytes | None,
                   hi: bytes | None) -> list[tuple[bytes, bytes]]:
    """The items of ``model`` in ``[lo, hi)`` in key order; ``None`` is unbounded.

    >>> expected_items({b"b": b"2", b"a": b"1", b"c": b"3"}, b"b", None)
    [(b'b', b'2'), (b'c', b'3')]
    """
    return [(k, model[k]) for k in sorted(model)
            if (lo is None or k >= lo) and (hi is None or k < hi)]


def dict_model_rules(keys, values, bounds):
    """A mixin of put, delete, get and snapshot rules drawn from the given strategies.

    The machine provides ``subject`` (the store or engine), ``model`` (a dict) and
    ``snapshots`` (a list of (snapshot, expected items) pairs).
    """

    class DictModelRules:
        def expected(self, lo, hi):
            return expected_items(self.model, lo, hi)

        # -- writes ----------------------------------------------------------------------------
        @rule(key=keys, value=values)
        def put(self, key, value):
            self.subject.put(key, value)
            self.model[key] = value

        @rule(key=keys)
        def delete(self, key):
            self.subject.delete(key)
            self.model.pop(key, None)

        # -- reads -----------------------------------------------------------------------------
        @rule(key=keys)
        def get(self, key):
            assert self.subject.get(key) == self.model.get(key)

        # -- snapshots -------------------------------------------------------------------------
        @precondition(lambda self: len(self.snapshots) < 3)
        @rule(lo=bounds, hi=bounds)
        def take_snapshot(self, lo, hi):
            self.snapshots.append((self.subject.snapshot(lo, hi), self.expected(lo, hi)))

        @precondition(lambda self: self.snapshots)
        @rule(data=st.data())
        def check_snapshot(self, data):
            i = data.draw(st.integers(0, len(self.snapshots) - 1))
            snap, expected = self.snapshots[i]
            with snap.iterator() as it:
                assert list(it) == expected
            if data.draw(st.booleans()):
                snap.close()
                del self.snapshots[i]

    return DictModelRules
