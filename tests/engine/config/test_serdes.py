"""Per-stream serdes (engine/config/serdes.py): the deserializer built once per stream."""

from __future__ import annotations

import pickle

import pytest

from weir.engine.config.serdes import stream_serdes
from weir.engine.errors import DeserializationError
from weir.engine.model import (EnvelopeKind, IncomingMessageEnvelope, SystemStream,
                               SystemStreamPartition)
from weir.stores.config import Config

SSP = SystemStreamPartition("filelog", "orders", 2)


def _serdes(**keys):
    return stream_serdes(Config({f"systems.filelog.samza.{k}.serde": v for k, v in keys.items()}),
                         SystemStream("filelog", "orders"))


def test_deserialize_types_key_and_message_and_keeps_the_rest_of_the_envelope():
    env = IncomingMessageEnvelope(SSP, 7, b"alice", b'{"amount": 3}', 1234, 18)
    typed = _serdes(key="string", msg="json").deserialize(env)
    assert typed == IncomingMessageEnvelope(SSP, 7, "alice", {"amount": 3}, 1234, 18)
    assert env.message == b'{"amount": 3}'  # the raw envelope is not changed


def test_null_keys_tombstones_and_control_envelopes_pass_through():
    serdes = _serdes(key="string", msg="json")
    tombstone = serdes.deserialize(IncomingMessageEnvelope(SSP, 1, None, None))
    assert (tombstone.key, tombstone.message) == (None, None)
    end = IncomingMessageEnvelope.end_of_stream(SSP, 9)
    assert serdes.deserialize(end) is end and end.kind is EnvelopeKind.END_OF_STREAM


def test_a_stream_without_serdes_hands_out_the_same_envelope():
    env = IncomingMessageEnvelope(SSP, 3, b"k", b"v")
    assert _serdes().deserialize(env) is env


@pytest.mark.parametrize("what, env", [
    ("key", IncomingMessageEnvelope(SSP, 5, b"\xff\xfe", b"{}")),
    ("message", IncomingMessageEnvelope(SSP, 5, b"ok", b"{not json")),
])
def test_a_failure_names_key_or_message_the_serde_the_partition_and_the_offset(what, env):
    with pytest.raises(DeserializationError) as err:
        _serdes(key="string", msg="json").deserialize(env)
    assert err.value.ssp == SSP and err.value.offset == 5
    assert f"cannot deserialize the {what} with serde" in str(err.value)


def test_stream_serdes_pickle_and_deserialize_after_unpickling():
    serdes = pickle.loads(pickle.dumps(_serdes(key="string", msg="json")))
    typed = serdes.deserialize(IncomingMessageEnvelope(SSP, 0, b"a", b"[1]"))
    assert (typed.key, typed.message, serdes.msg_serde_name) == ("a", [1], "json")
