"""The container memory budget: split across stores and tasks, explicit sizes win, bad values
are ConfigErrors naming the key."""

from __future__ import annotations

import pytest

from weir.stores.budget import ENTRY_BYTES, RUNTIME_RESERVE_MB, MemoryBudget
from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.stores.spec import StoreSpec

MIB = 1 << 20


def _config(**extra: str) -> Config:
    base = {}
    for name, engine in (("a", "rocksdb"), ("b", "lmdb")):
        base |= {f"stores.{name}.factory": engine, f"stores.{name}.key.serde": "bytes",
                 f"stores.{name}.msg.serde": "int64"}
    return Config(base | {k.replace("__", "."): v for k, v in extra.items()})


def _sized(cfg: Config, tasks: int) -> dict[str, StoreSpec]:
    specs = [StoreSpec.from_config(cfg, n) for n in ("a", "b")]
    return {s.name: s for s in MemoryBudget.from_config(cfg, ["a", "b"]).size(specs, tasks)}


def test_the_default_budget_caches_a_hot_set_far_beyond_samzas_1000_entries():
    sized = _sized(_config(), tasks=4)
    share = (1024 - RUNTIME_RESERVE_MB) * MIB // 2 // 4
    assert sized["a"].object_cache_size == share // 2 // ENTRY_BYTES > 100_000
    assert sized["a"].write_batch_size == sized["a"].object_cache_size // 4
    assert sized["a"].options.block_cache_size_bytes == share // 4
    assert sized["a"].options.write_buffer_size_bytes == share // 4 // 3
    assert sized["b"].object_cache_size == sized["a"].object_cache_size


def test_more_tasks_in_a_container_get_smaller_shares():
    one, eight = _sized(_config(), tasks=1), _sized(_config(), tasks=8)
    assert one["a"].object_cache_size == 8 * eight["a"].object_cache_size


def test_explicit_store_sizes_win_over_the_budget():
    cfg = _config(**{"stores__a__object.cache.size": "2000", "stores__a__write.batch.size": "100",
                     "stores__a__rocksdb.block.cache.size.bytes": str(8 * MIB)})
    a = _sized(cfg, tasks=4)["a"]
    assert (a.object_cache_size, a.write_batch_size) == (2000, 100)
    assert a.options.block_cache_size_bytes == 8 * MIB
    assert a.options.write_buffer_size_bytes != 32 * MIB  # still from the budget


def test_an_explicit_cache_smaller_than_the_derived_batch_caps_the_batch():
    a = _sized(_config(**{"stores__a__object.cache.size": "600"}), tasks=1)["a"]
    assert (a.object_cache_size, a.write_batch_size) == (600, 500)


def test_a_disabled_cache_stays_disabled():
    a = _sized(_config(**{"stores__a__object.cache.size": "0"}), tasks=1)["a"]
    assert a.object_cache_size == 0 and a.write_batch_size == 500


def test_a_store_with_its_own_part_takes_it_before_the_even_split():
    cfg = _config(**{"job__container__memory.mb": "1088", "stores__a__container.memory.mb": "256"})
    budget = MemoryBudget.from_config(cfg, ["a", "b"])
    shares = budget.shares([StoreSpec.from_config(cfg, n) for n in ("a", "b")], tasks=2)
    assert shares["a"].share_bytes == 128 * MIB
    assert shares["b"].share_bytes == (1088 - 64 - 256) * MIB // 2


def test_samzas_container_memory_key_is_accepted():
    cfg = _config(**{"cluster-manager__container__memory.mb": "2048"})
    assert MemoryBudget.from_config(cfg, ["a", "b"]).container_mb == 2048


def test_a_budget_below_the_runtime_reserve_is_refused_naming_the_key():
    with pytest.raises(ConfigError) as err:
        MemoryBudget.from_config(_config(**{"job__container__memory.mb": "64"}), ["a", "b"])
    assert "job.container.memory.mb" in str(err.value)


def test_store_parts_larger_than_the_budget_are_refused_with_the_fix():
    cfg = _config(**{"job__container__memory.mb": "512", "stores__a__container.memory.mb": "600"})
    with pytest.raises(ConfigError) as err:
        MemoryBudget.from_config(cfg, ["a", "b"])
    assert "stores.a.container.memory.mb" in str(err.value) and "664" in str(err.value)


def test_the_store_memory_key_is_a_known_store_key():
    cfg = _config(**{"stores__a__container.memory.mb": "100"})
    StoreSpec.from_config(cfg, "a")  # no "unknown key" error
