"""The stream model's envelopes: Samza's argument order cannot be ported by mistake."""

from __future__ import annotations

import pytest

from weir.engine.model import OutgoingMessageEnvelope, SystemStream, make_outgoing

OUT = SystemStream("filelog", "wikipedia-edits")


def test_samza_key_message_order_is_a_type_error_showing_the_keyword_form():
    with pytest.raises(TypeError) as caught:
        OutgoingMessageEnvelope(OUT, "the-key", {"the": "message"})

    text = str(caught.value)
    assert "OutgoingMessageEnvelope(stream, message, key=key)" in text
    assert "new OutgoingMessageEnvelope(stream, key, message)" in text
    assert "docs/PORTING.md" in text


def test_samza_partition_key_order_is_a_type_error_naming_partition_key_and_partition():
    with pytest.raises(TypeError, match=r"partition_key=partitionKey.*partition=partition"):
        OutgoingMessageEnvelope(OUT, "pkey", "key", "message")


def test_key_partition_key_partition_and_timestamp_are_keyword_only():
    env = OutgoingMessageEnvelope(OUT, {"m": 1}, key="k", partition_key="p", partition=3,
                                  timestamp=7)

    assert (env.message, env.key, env.partition_key, env.partition, env.timestamp) == \
        ({"m": 1}, "k", "p", 3, 7)


def test_the_engines_positional_constructor_builds_an_equal_envelope():
    assert make_outgoing(OUT, b"v", b"k", None, 2, 5) == \
        OutgoingMessageEnvelope(OUT, b"v", key=b"k", partition=2, timestamp=5)
