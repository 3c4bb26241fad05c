"""Record framing: round trips, what the length and CRC cover, tail classification."""

from __future__ import annotations

import struct

from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from weir.engine.systems.filelog._format import (
    MIN_RECORD,
    NULL_LEN,
    ParseStop,
    TailState,
    classify_tail,
    decode_all,
    encode_record,
    parse_records,
)

maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))


@given(st.lists(st.tuples(maybe_bytes, maybe_bytes, st.integers(-1, 2**63 - 1)), max_size=30))
def test_round_trip_keeps_null_and_empty_keys_and_values(records):
    buf = b"".join(encode_record(k, v, ts) for k, v, ts in records)
    assert decode_all(buf) == records


def test_null_and_empty_are_different_on_disk():
    assert encode_record(None, None) != encode_record(b"", b"")
    assert decode_all(encode_record(b"", b"") + encode_record(None, None)) == \
        [(b"", b"", -1), (None, None, -1)]


def test_length_counts_the_body_and_crc_covers_exactly_the_body():
    frame = encode_record(b"key", b"value", 1234)
    length, crc = struct.unpack_from("<II", frame)
    assert length == len(frame) - 8 == 8 + 4 + 3 + 4 + 5
    assert crc == crc32c(frame[8:])
    assert struct.unpack_from("<qI", frame, 8) == (1234, 3)
    assert len(encode_record(None, None)) == MIN_RECORD
    assert struct.unpack_from("<I", encode_record(None, b"x"), 16)[0] == NULL_LEN


def test_parse_stops_at_a_partial_record_and_reports_where():
    a, b = encode_record(b"a", b"1"), encode_record(b"b", b"2")
    out: list = []
    pos, ordinal, why = parse_records(a + b[:-1], 0, range(10), 0, 10,
                                      lambda c, o, k, v, t, s: (o, k), None, out)
    assert (pos, ordinal, why, out) == (len(a), 1, ParseStop.PARTIAL, [(0, b"a")])


def test_parse_flags_a_flipped_byte_as_bad():
    frame = bytearray(encode_record(b"key", b"value"))
    frame[-1] ^= 0x01
    out: list = []
    _, _, why = parse_records(bytes(frame), 0, range(1), 0, 1, lambda *a: a, None, out)
    assert why is ParseStop.BAD and out == []


def test_parse_stops_at_the_requested_ordinal():
    buf = b"".join(encode_record(None, b"%d" % i) for i in range(5))
    out: list = []
    pos, ordinal, why = parse_records(buf, 0, range(100, 105), 0, 3, lambda c, o, *r: o, None,
                                      out)
    assert (out, ordinal, why) == ([100, 101, 102], 3, ParseStop.COUNT)
    pos, ordinal, why = parse_records(buf, pos, range(100, 105), 3, 10, lambda c, o, *r: o,
                                      None, out)
    assert (out[3:], ordinal, why, pos) == ([103, 104], 5, ParseStop.COUNT, len(buf))


def test_parse_reports_partial_at_the_exact_end_of_the_buffer():
    buf = encode_record(b"a", b"1")
    out: list = []
    assert parse_records(buf, 0, range(9), 0, 9, lambda *a: a, None, out)[1:] == \
        (1, ParseStop.PARTIAL)


def test_inconsistent_inner_lengths_are_bad_even_with_a_good_crc():
    body = struct.pack("<qI", -1, 3) + b"key" + struct.pack("<I", 7)   # value says 7, has 0
    frame = struct.pack("<II", len(body), crc32c(body)) + body
    out: list = []
    assert parse_records(frame, 0, range(1), 0, 1, lambda *a: a, None, out)[2] is ParseStop.BAD


def test_parse_uses_the_offsets_of_a_gapped_segment():
    buf = encode_record(b"a", b"1") + encode_record(b"b", b"2")
    out: list = []
    parse_records(buf, 0, [7, 19], 0, 2, lambda c, o, k, *r: (o, k), None, out)
    assert out == [(7, b"a"), (19, b"b")]


def test_a_record_cut_short_at_the_end_is_torn():
    good, last = encode_record(b"a", b"1"), encode_record(b"b", b"22")
    for cut in (1, 5, 20, len(last) - 1):
        assert classify_tail(good + last[:cut], len(good)) is TailState.TORN


def test_a_whole_last_record_with_a_bad_crc_is_torn():
    last = bytearray(encode_record(b"b", b"22"))
    last[-1] ^= 0xFF
    assert classify_tail(bytes(last), 0) is TailState.TORN


def test_zero_fill_after_the_last_record_is_torn():
    assert classify_tail(b"\0" * 4096, 0) is TailState.TORN


def test_damage_followed_by_a_valid_record_is_corrupt():
    bad = bytearray(encode_record(b"b", b"22"))
    bad[10] ^= 0xFF
    assert classify_tail(bytes(bad) + encode_record(b"c", b"3"), 0) is TailState.CORRUPT
    bad_len = b"\x07\x00\x00\x00garbage!" + encode_record(b"c", b"3")
    assert classify_tail(bad_len, 0) is TailState.CORRUPT


def test_garbage_with_no_valid_record_after_it_is_torn():
    assert classify_tail(b"\x05\x00\x00\x00" + bytes(range(1, 60)), 0) is TailState.TORN


def test_nothing_after_the_last_record_is_clean():
    assert classify_tail(encode_record(b"a", b"1"), len(encode_record(b"a", b"1"))) is \
        TailState.CLEAN
