"""Built-in serdes, name resolution and user serdes from ``serializers.registry``."""

from __future__ import annotations

import sys
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir.stores.config import Config
from weir.stores.errors import ConfigError, SerdeError
from weir.stores.serdes import (BUILTIN_SERDES, BytesSerde, Int64Serde, JsonSerde, MsgpackSerde,
                           Serde, StringSerde, serde_from_name)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(a=INT64, b=INT64)
def test_int64_byte_order_equals_numeric_order(a, b):
    s = Int64Serde()
    assert (s.to_bytes(a) < s.to_bytes(b)) == (a < b)
    assert (s.to_bytes(a) == s.to_bytes(b)) == (a == b)


@given(n=INT64)
def test_int64_round_trips_in_eight_bytes(n):
    s = Int64Serde()
    data = s.to_bytes(n)
    assert len(data) == 8
    assert s.from_bytes(data) == n


def test_int64_flips_the_sign_bit():
    s = Int64Serde()
    assert s.to_bytes(0) == b"\x80" + b"\x00" * 7
    assert s.to_bytes(-1) == b"\x7f" + b"\xff" * 7
    assert s.to_bytes(-(2**63)) == b"\x00" * 8


@given(numbers=st.lists(INT64, max_size=40))
def test_int64_batch_encoding_equals_one_by_one(numbers):
    s = Int64Serde()
    assert s.to_bytes_many(numbers) == [s.to_bytes(n) for n in numbers]


def test_bytes_batch_encoding_copies_buffers_and_rejects_other_types():
    s = BytesSerde()
    assert s.to_bytes_many([b"a", bytearray(b"b"), memoryview(b"c")]) == [b"a", b"b", b"c"]
    assert s.to_bytes_many([]) == []
    with pytest.raises(TypeError):
        s.to_bytes_many([b"a", "text"])


@pytest.mark.parametrize("bad", [[1, 2.5], [1, "2"], [2**63], [None]])
def test_int64_batch_encoding_rejects_the_whole_batch(bad):
    with pytest.raises(Exception):
        Int64Serde().to_bytes_many(bad)


@pytest.mark.parametrize("bad", [2**63, -(2**63) - 1])
def test_int64_rejects_numbers_outside_its_range(bad):
    with pytest.raises(OverflowError, match="int64 range"):
        Int64Serde().to_bytes(bad)


@pytest.mark.parametrize("bad", [1.5, "1", None, b"\x00"])
def test_int64_rejects_non_integers(bad):
    with pytest.raises(TypeError):
        Int64Serde().to_bytes(bad)


def test_int64_rejects_data_of_the_wrong_length():
    with pytest.raises(ValueError, match="8 bytes"):
        Int64Serde().from_bytes(b"\x00\x01")


@given(text=st.text())
def test_string_round_trips_as_utf8(text):
    s = StringSerde()
    assert s.to_bytes(text) == text.encode("utf-8")
    assert s.from_bytes(s.to_bytes(text)) == text


def test_string_rejects_invalid_utf8_and_non_strings():
    with pytest.raises(UnicodeDecodeError):
        StringSerde().from_bytes(b"\xff")
    with pytest.raises(TypeError):
        StringSerde().to_bytes(5)


def test_bytes_serde_passes_bytes_through_and_copies_buffers():
    s = BytesSerde()
    data = b"abc"
    assert s.to_bytes(data) is data
    assert s.to_bytes(bytearray(b"xy")) == b"xy"
    assert s.to_bytes(memoryview(b"zz")) == b"zz"
    with pytest.raises(TypeError):
        s.to_bytes(5)  # bytes(5) would silently be five zero bytes
    with pytest.raises(TypeError):
        s.to_bytes("text")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children,
                                                                      max_size=4),
    max_leaves=12)


@given(value=JSON_VALUES)
def test_json_and_msgpack_round_trip(value):
    for serde in (JsonSerde(), MsgpackSerde()):
        assert serde.from_bytes(serde.to_bytes(value)) == value


def test_json_sorts_dict_keys_so_equal_dicts_give_equal_bytes():
    s = JsonSerde()
    assert s.to_bytes({"b": 1, "a": 2}) == s.to_bytes({"a": 2, "b": 1}) == b'{"a":2,"b":1}'


def test_json_rejects_unserializable_objects():
    with pytest.raises(TypeError):
        JsonSerde().to_bytes(object())


def test_every_builtin_is_a_serde():
    for cls in BUILTIN_SERDES.values():
        assert isinstance(cls(), Serde)


@pytest.mark.parametrize("name, canonical", [
    ("bytes", "bytes"), ("byte", "bytes"), ("string", "string"), ("STRING", "string"),
    ("utf8", "string"), ("int64", "int64"), ("long", "int64"), ("integer", "int64"),
    ("json", "json"), ("msgpack", "msgpack"),
])
def test_builtin_names_and_aliases_resolve(name, canonical):
    assert serde_from_name(name, Config()).name == canonical


def test_unknown_serde_name_raises_config_error_naming_the_key():
    cfg = Config({"stores.s.key.serde": "avro"}, origins={"stores.s.key.serde": "job.properties:4"})
    with pytest.raises(ConfigError) as info:
        serde_from_name("avro", cfg, key="stores.s.key.serde")
    message = str(info.value)
    assert "stores.s.key.serde" in message and "job.properties:4" in message
    assert "avro" in message and "serializers.registry.avro.class" in message


def test_samza_serde_factory_names_map_to_builtins():
    cfg = Config({"serializers.registry.str.class": "org.apache.samza.serializers.StringSerdeFactory",
                  "serializers.registry.num.class": "org.apache.samza.serializers.LongSerdeFactory"})
    assert serde_from_name("str", cfg).name == "string"
    assert serde_from_name("num", cfg).name == "int64"


@pytest.fixture
def user_module():
    module = types.ModuleType("weir_test_user_serdes")

    class Upper:
        def to_bytes(self, obj):
            return obj.upper().encode()

        def from_bytes(self, data):
            return data.decode().lower()

    class Prefixed:
        def __init__(self, config):
            self.prefix = config["my.prefix"].encode()

        def to_bytes(self, obj):
            return self.prefix + obj

        def from_bytes(self, data):
            return data[len(self.prefix):]

    class NotASerde:
        pass

    class OptionalConfig(Prefixed):
        def __init__(self, config=None):
            super().__init__(config if config is not None else {"my.prefix": "none:"})

    module.Upper, module.Prefixed, module.NotASerde = Upper, Prefixed, NotASerde
    module.OptionalConfig = OptionalConfig
    sys.modules[module.__name__] = module
    yield module.__name__
    del sys.modules[module.__name__]


def test_user_serde_without_arguments_is_constructed_with_no_arguments(user_module):
    cfg = Config({"serializers.registry.up.class": f"{user_module}:Upper"})
    serde = serde_from_name("up", cfg)
    assert serde.to_bytes("abc") == b"ABC"


def test_user_serde_taking_one_argument_receives_the_config(user_module):
    cfg = Config({"serializers.registry.p.class": f"{user_module}:Prefixed", "my.prefix": "x:"})
    assert serde_from_name("p", cfg).to_bytes(b"1") == b"x:1"


def test_user_serde_with_an_optional_config_argument_receives_the_config(user_module):
    cfg = Config({"serializers.registry.p.class": f"{user_module}:OptionalConfig",
                  "my.prefix": "x:"})
    assert serde_from_name("p", cfg).to_bytes(b"1") == b"x:1"


def test_registry_entry_overrides_a_builtin_name(user_module):
    cfg = Config({"serializers.registry.string.class": f"{user_module}:Upper"})
    assert serde_from_name("string", cfg).to_bytes("a") == b"A"


@pytest.mark.parametrize("target, fragment", [
    ("no_such_module_xyz:Serde", "cannot import"),
    ("weir_test_user_serdes:Missing", "cannot import"),
    ("weir_test_user_serdes:NotASerde", "needs to_bytes"),
    ("weir_test_user_serdes.Upper", "module:Class"),
    ("weir_test_raises_on_import:Serde", r"cannot import.*RuntimeError.*boom"),
    ("weir_test_bad_syntax:Serde", r"cannot import.*SyntaxError"),
    ("", "is empty"),
])
def test_bad_user_serde_raises_config_error_naming_the_registry_key(user_module, target, fragment,
                                                                   tmp_path, monkeypatch):
    (tmp_path / "weir_test_raises_on_import.py").write_text("raise RuntimeError('boom')\n")
    (tmp_path / "weir_test_bad_syntax.py").write_text("def broken(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = Config({"serializers.registry.x.class": target},
                 origins={"serializers.registry.x.class": "job.properties:9"})
    with pytest.raises(ConfigError, match=fragment) as info:
        serde_from_name("x", cfg)
    assert "serializers.registry.x.class" in str(info.value)
    assert "job.properties:9" in str(info.value)


class _StrSerde:
    """A broken user serde: to_bytes returns str."""

    def to_bytes(self, obj):
        return str(obj)

    def from_bytes(self, data):
        return data.decode()


def test_user_serde_returning_str_fails_with_serde_error_naming_serde_store_and_key(tmp_path):
    from weir.stores import SerdeError, StoreSpec, build_store

    config = Config({"serializers.registry.bad.class": f"{__name__}:_StrSerde",
                     "stores.s.factory": "rocksdb", "stores.s.key.serde": "string",
                     "stores.s.msg.serde": "bad", "stores.s.object.cache.size": "0"})
    store = build_store(StoreSpec.from_config(config, "s"), tmp_path / "s", changelog=None,
                        config=config)
    try:
        with pytest.raises(SerdeError) as err:
            store.put("k", 42)
            store.flush()
        message = str(err.value)
        assert "_StrSerde" in message and "not bytes" in message
    finally:
        store.close()


def test_private_to_bytes_of_msgpack_is_a_packer_of_its_own_writing_the_same_bytes():
    serde = MsgpackSerde()
    first, second = serde.private_to_bytes(), serde.private_to_bytes()
    assert first is not second
    assert first({"a": (1, 2)}) == serde.to_bytes({"a": (1, 2)}) == second({"a": [1, 2]})


def test_private_to_bytes_defaults_to_to_bytes():
    serde = JsonSerde()
    assert serde.private_to_bytes() == serde.to_bytes


def test_a_plain_user_serde_hands_out_its_checked_to_bytes_as_private(user_module):
    module = sys.modules[user_module]

    class Text:
        def to_bytes(self, obj):
            return obj          # str, not bytes

        def from_bytes(self, data):
            return data

    module.Text = Text
    serde = serde_from_name("t", Config({"serializers.registry.t.class": f"{user_module}:Text"}))
    with pytest.raises(SerdeError, match="returned str, not bytes"):
        serde.private_to_bytes()("abc")


def test_a_user_serde_declaring_private_to_bytes_hands_out_its_own(user_module):
    from weir.stores.serdes import SerdeBase

    module = sys.modules[user_module]
    packer = object()

    class Declared(SerdeBase):
        def to_bytes(self, obj):
            return b"x"

        def from_bytes(self, data):
            return data

        def private_to_bytes(self):
            return packer

    module.Declared = Declared
    serde = serde_from_name("d", Config({"serializers.registry.d.class": f"{user_module}:Declared"}))
    assert serde.private_to_bytes() is packer
