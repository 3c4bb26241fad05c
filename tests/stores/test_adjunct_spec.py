"""``stores.<s>.adstore.*``: parsed once into AdjunctSpec; bad values name the key."""

from __future__ import annotations

import pytest

from weir.stores.adjunct import AdjunctSpec, RejectedKeys, adjunct_specs
from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.stores.spec import StoreSpec

BASE = {"stores.p.factory": "rocksdb", "stores.p.key.serde": "string",
        "stores.p.msg.serde": "json"}


def test_every_adstore_key_is_parsed_into_the_spec():
    cfg = Config({**BASE, "stores.p.adstore.input": "log.products-cdc",
                  "stores.p.adstore.key.value.extractor.factory": "m:F",
                  "stores.p.adstore.projection": "name, price,",
                  "stores.p.adstore.versioned": "true",
                  "stores.p.adstore.rejected.keys": "drop",
                  "stores.p.adstore.staleness.ms": "5000"})
    assert adjunct_specs(cfg) == {"p": AdjunctSpec("p", ("log", "products-cdc"), "m:F",
                                                   ("name", "price"), True, RejectedKeys.DROP,
                                                   5000)}
    StoreSpec.from_config(cfg, "p")  # the store itself accepts its adstore keys


@pytest.mark.parametrize("key,value,message", [
    ("stores.p.adstore.input", "products", "system.stream"),
    ("stores.p.adstore.key.value.extractor.factory", "no_colon", "module:Factory"),
    ("stores.p.adstore.staleness.ms", "0", "positive"),
    ("stores.p.adstore.rejected.keys", "maybe", "fail"),
])
def test_a_bad_adstore_value_names_its_key(key, value, message):
    values = {**BASE, "stores.p.adstore.input": "log.p", key: value}
    with pytest.raises(ConfigError, match=message) as info:
        adjunct_specs(Config(values))
    assert info.value.key == key


def test_a_misspelt_adstore_key_is_refused_by_the_store():
    cfg = Config({**BASE, "stores.p.adstore.inptu": "log.p"})
    with pytest.raises(ConfigError, match="did you mean stores.p.adstore.input"):
        StoreSpec.from_config(cfg, "p")
