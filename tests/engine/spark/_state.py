"""Helpers for tests of the Weir state provider without Spark: one operator's checkpoint, and a
batch run the way an operator task runs it (open, read-modify-write, commit)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from weir.engine.spark.durable import OperatorCheckpoint, OperatorMeta
from weir.engine.spark.partition import PartitionState
from weir.engine.spark.providers import store_specs
from weir.engine.spark.settings import ProviderSettings
from weir.engine.spark.storage import StorageOptions


class Operator:
    """A running-count operator over one store, ``counts`` (string keys, int64 values)."""

    def __init__(self, checkpoint: Path | str, local: Path, *, provider: str = "rocksdb",
                 partitions: int = 2, interval: int = 3, retain: int = 100,
                 name: str = "counts", query: str | None = "q-1",
                 storage: StorageOptions | None = None):
        self.checkpoint = OperatorCheckpoint(checkpoint, name, storage)
        self.stores = store_specs(["counts"], {"stores.counts.key.serde": "string",
                                               "stores.counts.msg.serde": "int64"}, provider)
        self.settings = ProviderSettings(provider=provider, snapshot_interval=interval,
                                         min_versions_to_retain=retain, local_dir=str(local),
                                         storage=storage or StorageOptions())
        self.partitions = partitions
        self.query = query

    def meta(self, created: int = 0) -> OperatorMeta:
        wanted = OperatorMeta(self.checkpoint.operator, "state-operator", self.partitions,
                              {s.name: s.describe() for s in self.stores}, self.query, created)
        return self.checkpoint.ensure_meta(wanted)

    def state(self, partition: int, batch: int) -> PartitionState:
        return PartitionState(self.checkpoint, self.meta(), partition, batch, self.stores,
                              self.settings)

    def run(self, partition: int, batch: int, words: list[str], *, fail_after_publish=False):
        """One task: count ``words`` into partition ``partition`` at ``batch``; returns the
        (outcome, emitted counts)."""
        state = self.state(partition, batch)
        state.open()
        try:
            if state.published is not None:
                keys, values = state.outputs()
                return "replayed", dict(zip((k.decode() for k in keys),
                                            (int(v) for v in values)))
            counts = state.store("counts")
            emitted = {}
            for word, n in Counter(words).items():
                total = (counts.get(word) or 0) + n
                counts.put(word, total)
                emitted[word] = total
            outcome = state.commit(outputs=[(k.encode(), str(v).encode())
                                            for k, v in sorted(emitted.items())])
            if fail_after_publish:
                raise RuntimeError("injected failure after publish")
            keys, values = state.outputs()
            return outcome, dict(zip((k.decode() for k in keys), (int(v) for v in values)))
        finally:
            state.close()

    def replica_counts(self, partition: int) -> dict[str, int]:
        """What this process's replica of ``partition`` holds."""
        from weir.engine.spark.replica import _OPEN
        replica = _OPEN[(str(self.checkpoint.root), partition)]
        engine = replica.engines["counts"]
        with engine.all() as it:
            return {k.decode(): _int64(v) for k, v in it}


def _int64(raw: bytes) -> int:
    return int.from_bytes(raw, "big") - (1 << 63)
