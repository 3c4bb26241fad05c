"""Coordinator messages: Samza's bytes (SAMZA-REFERENCE 5.1, 5.2), decoding and its errors."""

from __future__ import annotations

import json
import re

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir.engine.coordinator.messages import (CoordinatorMessage, MessageDecodeError, MessageType,
                                              decode_message)
from weir.engine.coordinator.settings import coordinator_stream_name

WRITER = dict(source="coordinator-stream-writer", host="10.1.2.3", username="samza",
              timestamp=1700000000123)


def test_set_config_key_and_value_bytes_match_the_reference_example():
    msg = CoordinatorMessage.set_config("job.name", "test_job", **WRITER)

    assert msg.key_bytes() == b'[1,"set-config","job.name"]'
    assert msg.value_bytes() == (b'{"host":"10.1.2.3","username":"samza",'
                                 b'"source":"coordinator-stream-writer","timestamp":1700000000123,'
                                 b'"values":{"value":"test_job"}}')


def test_set_changelog_stores_the_partition_as_a_string():
    msg = CoordinatorMessage.set_changelog("Partition 3", 3, **WRITER)

    assert msg.key_bytes() == b'[1,"set-changelog","Partition 3"]'
    assert orjson.loads(msg.value_bytes())["values"] == {"Partition": "3"}


def test_container_host_assignment_has_samzas_value_fields():
    msg = CoordinatorMessage.set_container_host("0", "worker-1", jmx_url="jmx://x", **WRITER)

    assert msg.key_bytes() == b'[1,"set-container-host-assignment","0"]'
    assert orjson.loads(msg.value_bytes())["values"] == {
        "host": "worker-1", "jmx-url": "jmx://x", "jmx-tunneling-url": ""}


def test_a_delete_has_a_null_value_and_keeps_its_type_in_the_key():
    msg = CoordinatorMessage.delete(MessageType.SET_CONFIG, "task.window.ms", source="x")

    assert msg.key_bytes() == b'[1,"set-config","task.window.ms"]'
    assert msg.value_bytes() is None and msg.is_delete


def test_non_ascii_values_are_written_as_utf8_not_escaped():
    msg = CoordinatorMessage.set_config("job.description", "Zähler", **WRITER)

    assert "Zähler".encode() in msg.value_bytes()


def test_the_stream_name_turns_underscores_inside_name_and_id_into_dashes():
    assert coordinator_stream_name("test_job", "1") == "__samza_coordinator_test-job_1"
    assert coordinator_stream_name("a_b", "x_y") == "__samza_coordinator_a-b_x-y"


def test_equality_ignores_writer_details_as_samza_does():
    a = CoordinatorMessage.set_config("k", "v", source="a", host="h1", username="u", timestamp=1)
    b = CoordinatorMessage.set_config("k", "v", source="b", host="h2", username="w", timestamp=2)

    assert a == b
    assert a != CoordinatorMessage.set_config("k", "other", source="a")


def test_a_key_with_the_version_as_a_string_is_read_too():
    msg = decode_message(b'["1","set-config","k"]', None)

    assert (msg.type, msg.key, msg.is_delete) == ("set-config", "k", True)


@pytest.mark.parametrize("key, value, words", [
    (None, b"{}", "no key"),
    (b"not json", None, "not JSON"),
    (b'{"k": 1}', None, "not [version, type, key]"),
    (b'[2,"set-config","k"]', None, "format version 2"),
    (b'[1,"set-config","k"]', b"{broken", "not JSON"),
    (b'[1,"set-config","k"]', b'{"values": 3}', "'values' object"),
])
def test_malformed_records_raise_a_decode_error_saying_what_is_wrong(key, value, words):
    with pytest.raises(MessageDecodeError, match=re.escape(words)):
        decode_message(key, value)


@given(type_=st.sampled_from([t.value for t in MessageType]), key=st.text(),
       values=st.dictionaries(st.text(), st.text()), source=st.text(),
       timestamp=st.integers(min_value=0, max_value=2**62))
def test_every_message_survives_encoding_and_decoding(type_, key, values, source, timestamp):
    msg = CoordinatorMessage.make(type_, key, values, source=source, host="h", username="u",
                                  timestamp=timestamp)

    back = decode_message(msg.key_bytes(), msg.value_bytes(), 7)

    assert back == msg
    assert (back.source, back.timestamp, back.offset, dict(back.values)) == (
        source, timestamp, 7, values)
    compact = (",", ":")
    assert msg.key_bytes() == json.dumps([1, type_, key], separators=compact,
                                         ensure_ascii=False).encode()
