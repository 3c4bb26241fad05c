"""The in-band wire format (SAMZA-REFERENCE 2.1, 2.2): types, bytes, reading, failures."""

from __future__ import annotations

import pytest

from weir.engine.config.serdes import SerdeManager
from weir.engine.control import (BadTaskCountError, DrainMessage, EndOfStreamMessage,
                                 MalformedControlMessageError, MessageType,
                                 UnknownControlVersionError, UnknownMessageTypeError,
                                 WatermarkMessage, WatermarkStatus, WatermarkStatusMessage,
                                 decode_control, encode_control)
from weir.engine.control.messages import ControlDecodeFailure
from weir.engine.errors import DeserializationError
from weir.engine.model import (EnvelopeKind, IncomingMessageEnvelope, OutgoingMessageEnvelope,
                               SystemStream, SystemStreamPartition)
from weir.stores.config import Config

SSP = SystemStreamPartition("filelog", "p1", 3)
INTERMEDIATE = Config({"streams.p1.samza.system": "filelog", "streams.p1.samza.intermediate": "true",
                       "streams.p1.samza.msg.serde": "json", "streams.p1.samza.key.serde": "string"})


def serdes():
    return SerdeManager(INTERMEDIATE).for_stream(SystemStream("filelog", "p1"))


def read(data: bytes, offset: int = 17) -> IncomingMessageEnvelope:
    return serdes().deserialize(IncomingMessageEnvelope(SSP, offset, None, data))


# -- 2.1 message types -------------------------------------------------------------------------

def test_message_type_ordinals_are_samzas_then_weirs_watermark_status():
    assert [t.value for t in MessageType] == [0, 1, 2, 3, 4]
    assert [t.name for t in MessageType] == ["USER_MESSAGE", "WATERMARK", "END_OF_STREAM", "DRAIN",
                                             "WATERMARK_STATUS"]


def test_message_type_of_anything_that_is_not_a_control_message_is_user_message():
    assert MessageType.of({"a": 1}) is MessageType.USER_MESSAGE
    assert MessageType.of(WatermarkMessage(1)) is MessageType.WATERMARK
    assert MessageType.of(EndOfStreamMessage()) is MessageType.END_OF_STREAM
    assert MessageType.of(DrainMessage("r")) is MessageType.DRAIN


def test_control_messages_are_equal_by_type_version_task_name_and_fields():
    assert WatermarkMessage(5, "Partition 0") == WatermarkMessage(5, "Partition 0")
    assert WatermarkMessage(5, "Partition 0") != WatermarkMessage(6, "Partition 0")
    assert EndOfStreamMessage("a") != EndOfStreamMessage("b")
    assert EndOfStreamMessage(None).task_name is None      # from a source or an aggregator
    assert DrainMessage("r1", "a") != DrainMessage("r2", "a")
    assert WatermarkMessage(1).version == 1


# -- 2.2 wire format -------------------------------------------------------------------------

def test_control_messages_are_byte_exact_to_samzas_jackson_output():
    assert encode_control(WatermarkMessage(123, "Partition 0")) == \
        b'\x01{"timestamp":123,"taskName":"Partition 0","version":1}'
    assert encode_control(EndOfStreamMessage("Partition 0")) == \
        b'\x02{"taskName":"Partition 0","version":1}'
    assert encode_control(EndOfStreamMessage(None)) == b'\x02{"taskName":null,"version":1}'
    assert encode_control(DrainMessage("run-1", "Partition 0")) == \
        b'\x03{"taskName":"Partition 0","version":1,"runId":"run-1"}'


def test_task_count_follows_the_task_name_when_the_sender_knows_it():
    assert encode_control(WatermarkMessage(123, "Partition 0", 4)) == \
        b'\x01{"timestamp":123,"taskName":"Partition 0","taskCount":4,"version":1}'
    assert encode_control(DrainMessage("r", "t", 2)) == \
        b'\x03{"taskName":"t","taskCount":2,"version":1,"runId":"r"}'


def test_every_control_message_reads_back_equal():
    for message in (WatermarkMessage(-1, None), WatermarkMessage(2**62, "t", 9),
                    EndOfStreamMessage("Partition 12", 3), EndOfStreamMessage(None),
                    DrainMessage("run-ü", "Partition 0", 1)):
        assert decode_control(encode_control(message)) == message


def test_dashed_property_names_are_read_too():
    assert decode_control(b'\x01{"timestamp":4,"task-name":"t","task-count":2,"version":1}') == \
        WatermarkMessage(4, "t", 2)
    assert decode_control(b'\x03{"task-name":"t","version":1,"run-id":"r"}') == DrainMessage("r", "t")


def test_unknown_properties_are_refused_with_stream_partition_and_offset():
    with pytest.raises(MalformedControlMessageError) as err:
        decode_control(b'\x02{"taskName":"t","version":1,"extra":true}', ssp=SSP, offset=17)
    assert "filelog.p1 partition 3 offset 17" in str(err.value) and "'extra'" in str(err.value)
    assert (err.value.stream, err.value.partition, err.value.offset) == ("filelog.p1", 3, 17)


@pytest.mark.parametrize("data", [b"", b"\x05{}", b"\xff"])
def test_an_empty_record_or_a_type_byte_outside_0_to_4_is_an_unknown_message_type(data):
    with pytest.raises(UnknownMessageTypeError, match="offset 17") as err:
        decode_control(data, ssp=SSP, offset=17)
    assert "no type byte" in str(err.value)


def test_watermark_status_messages_are_type_4_in_the_same_compact_json():
    idle = WatermarkStatusMessage(WatermarkStatus.IDLE, "Partition 0", 2)
    assert encode_control(idle) == \
        b'\x04{"status":"IDLE","taskName":"Partition 0","taskCount":2,"version":1}'
    assert encode_control(WatermarkStatusMessage(WatermarkStatus.ACTIVE, "Partition 1")) == \
        b'\x04{"status":"ACTIVE","taskName":"Partition 1","version":1}'
    assert decode_control(encode_control(idle)) == idle and idle.idle
    assert MessageType.of(idle) is MessageType.WATERMARK_STATUS
    assert decode_control(b'\x04{"status":"ACTIVE","task-name":"t","task-count":3,"version":1}') \
        == WatermarkStatusMessage(WatermarkStatus.ACTIVE, "t", 3)


@pytest.mark.parametrize("body", [b'{"taskName":"t","version":1}',
                                  b'{"status":"idle","taskName":"t","version":1}',
                                  b'{"status":1,"taskName":"t","version":1}',
                                  b'{"status":"IDLE","timestamp":3,"taskName":"t","version":1}'])
def test_a_watermark_status_without_a_known_status_or_with_other_fields_is_malformed(body):
    with pytest.raises(MalformedControlMessageError, match="offset 9"):
        decode_control(b"\x04" + body, ssp=SSP, offset=9)


def test_a_watermark_status_of_a_newer_version_is_refused_by_version():
    with pytest.raises(UnknownControlVersionError):
        decode_control(b'\x04{"status":"IDLE","taskName":"t","version":2}', ssp=SSP, offset=1)


def test_an_unknown_version_is_a_typed_error_naming_stream_partition_and_offset():
    with pytest.raises(UnknownControlVersionError) as err:
        decode_control(b'\x01{"timestamp":1,"taskName":"t","version":2}', ssp=SSP, offset=41)
    assert err.value.version == 2
    assert "filelog.p1 partition 3 offset 41" in str(err.value)


@pytest.mark.parametrize("count", [0, -1, "2", 1.5, True])
def test_a_task_count_that_is_not_a_positive_integer_is_a_bad_task_count(count):
    import orjson
    data = b"\x02" + orjson.dumps({"taskName": "t", "taskCount": count, "version": 1})
    with pytest.raises(BadTaskCountError, match="offset 5"):
        decode_control(data, ssp=SSP, offset=5)


def test_a_watermark_without_an_integer_timestamp_is_malformed():
    with pytest.raises(MalformedControlMessageError, match="timestamp"):
        decode_control(b'\x01{"taskName":"t","version":1}')


def test_user_messages_carry_type_byte_zero_then_the_user_serde():
    key, message = serdes().serialize(OutgoingMessageEnvelope(SystemStream("filelog", "p1"),
                                                              {"a": 1}, key="k"))
    assert key == b"k" and message == b'\x00{"a":1}'
    typed = read(message)
    assert typed.kind is EnvelopeKind.MESSAGE and typed.message == {"a": 1}


def test_control_messages_are_written_with_a_null_key_whatever_the_key_serde():
    key, message = serdes().serialize(OutgoingMessageEnvelope(
        SystemStream("filelog", "p1"), EndOfStreamMessage("t", 1), key="ignored"))
    assert key is None and message == b'\x02{"taskName":"t","taskCount":1,"version":1}'


def test_a_control_record_reads_as_a_control_envelope_at_its_offset():
    env = read(encode_control(WatermarkMessage(9, "t", 1)), offset=88)
    assert env.kind is EnvelopeKind.CONTROL and env.offset == 88 and env.key is None
    assert env.message == WatermarkMessage(9, "t", 1)


def test_a_bad_control_record_is_handed_on_in_order_not_raised_by_the_consumer():
    env = read(b"\x09junk", offset=3)
    assert env.kind is EnvelopeKind.CONTROL
    assert isinstance(env.message, ControlDecodeFailure)
    assert isinstance(env.message.error, UnknownMessageTypeError)


def test_a_user_serde_failure_is_a_deserialization_error():
    with pytest.raises(DeserializationError, match="offset 17"):
        read(b"\x00{not json")


def test_a_null_user_message_stays_null_without_a_type_byte():
    _, message = serdes().serialize(OutgoingMessageEnvelope(SystemStream("filelog", "p1"), None, key="k"))
    assert message is None
    assert read(None).message is None


def test_only_streams_marked_intermediate_get_the_type_byte():
    plain = SerdeManager(Config({"systems.filelog.samza.msg.serde": "json"}))
    _, message = plain.serialize(OutgoingMessageEnvelope(SystemStream("filelog", "p1"), {"a": 1}))
    assert message == b'{"a":1}'
