"""Integer and number keys are bounded by one shared parse: every integer fits in a signed
64-bit integer, a duration (``*.ms``) is -1 or more and at most MAX_DURATION_MS, a declaration
may narrow that (``minimum`` / ``maximum``), and a number must be finite. Out of range is a
ConfigError naming the key, where it was set and the range."""

from __future__ import annotations

import pytest

from weir import stores
from weir.stores.config import MAX_DURATION_MS, Config, ConfigError, declare


@pytest.fixture(autouse=True)
def registry(monkeypatch):
    """A private copy of the key registry, so test declarations never leak into the docs."""
    monkeypatch.setattr(stores.config, "_REGISTRY", dict(stores.config._REGISTRY))


def cfg(key: str, value: str) -> Config:
    return Config({key: value}, origins={key: "job.properties:7"})


@pytest.mark.parametrize("value", ["-5", "-2"])
def test_a_negative_duration_other_than_minus_one_is_refused(value):
    key = declare("t.commit.ms", int, 60_000, "A duration.", component="t")

    with pytest.raises(ConfigError) as info:
        key.get(cfg("t.commit.ms", value))

    assert str(info.value) == (
        f"config key 't.commit.ms' (set at job.properties:7): bad value '{value}': expected "
        f"an integer from -1 to {MAX_DURATION_MS:,} (milliseconds; -1 is the only negative "
        f"value, where the key allows turning it off)")


def test_minus_one_zero_and_the_longest_duration_are_accepted():
    key = declare("t.commit.ms", int, 60_000, "A duration.", component="t")

    assert [key.get(cfg("t.commit.ms", v)) for v in ("-1", "0", str(MAX_DURATION_MS))] == \
        [-1, 0, MAX_DURATION_MS]


def test_a_duration_longer_than_the_longest_is_refused():
    key = declare("t.commit.ms", int, 60_000, "A duration.", component="t")

    with pytest.raises(ConfigError, match="expected an integer from -1 to"):
        key.get(cfg("t.commit.ms", str(MAX_DURATION_MS + 1)))


def test_an_integer_beyond_64_bits_is_refused_for_every_integer_key():
    key = declare("t.batch.size", int, 10, "A count.", component="t")

    with pytest.raises(ConfigError) as info:
        key.get(cfg("t.batch.size", str(10 ** 23)))

    assert "bad value '100000000000000000000000': expected an integer" in str(info.value)
    assert "does not fit in a signed 64-bit integer" in str(info.value)
    with pytest.raises(ConfigError, match="64-bit"):
        cfg("t.batch.size", str(-2 ** 63 - 1)).get_int("t.batch.size")


def test_a_declared_minimum_and_maximum_bound_the_value():
    port = declare("t.port", int, 0, "A port.", component="t", minimum=0, maximum=65535)

    assert port.get(cfg("t.port", "65535")) == 65535
    for bad in ("-1", "65536"):
        with pytest.raises(ConfigError, match=f"bad value '{bad}': expected an integer from 0 "
                                              f"to 65,535"):
            port.get(cfg("t.port", bad))
    assert port.type_name == "integer, 0 to 65,535"


def test_a_duration_declared_positive_refuses_zero_and_minus_one():
    interval = declare("t.poll.interval.ms", int, 50, "A period.", component="t", minimum=1)

    for bad in ("0", "-1"):
        with pytest.raises(ConfigError, match="expected an integer from 1 to"):
            interval.get(cfg("t.poll.interval.ms", bad))
    assert interval.type_name == "integer (ms), at least 1"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
def test_a_number_must_be_finite(value):
    ratio = declare("t.ratio", float, 0.5, "A ratio.", component="t")

    with pytest.raises(ConfigError, match=f"bad value '{value}': expected a number .*finite"):
        ratio.get(cfg("t.ratio", value))
