"""Transactions on a damaged log, as a hostile operator leaves it: a flipped byte in a batch
header, a record or a marker, a segment cut in the middle of a transaction. Each gives either
the committed records, exactly, or a ``CorruptRecordError`` naming stream, partition and
offset; never a reader that waits for good, never committed records dropped."""

from __future__ import annotations

import os
import struct

import pytest

from weir.engine.errors import CorruptRecordError, ProducerStateCorruptError
from weir.engine.systems.filelog.segment import list_segments
from weir.engine.systems.filelog.abandoned import complete_abandoned
from weir.engine.systems.filelog.producer_state import load_producer_state

from tests.engine.systems.filelog.test_transactions import (COMMITTED, UNCOMMITTED, _commit,
                                                            _die, _producer, _send, _values)

# The log every test starts from (offsets): header 0, c1 1, c2 2, commit 3 | header 4, a1 5,
# abort 6 | header 7, c3 8, commit 9.
HEADER, RECORD, COMMIT_MARKER, ABORTED_RECORD, ABORT_MARKER, LAST_COMMIT = 0, 1, 3, 5, 6, 9


def _setup(log):
    log.create()
    producer = _producer(log)
    _send(producer, b"c1", b"c2")
    _commit(producer)
    _send(producer, b"a1")
    producer.flush()
    producer.abort()
    _send(producer, b"c3")
    _commit(producer)
    producer.stop()
    return list_segments(log.pdir())[-1].path


def _frame_position(path: str, frame: int) -> int:
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    for _ in range(frame):
        pos += 8 + struct.unpack_from("<I", data, pos)[0]
    return pos


def _flip(path: str, frame: int) -> None:
    """Flip one bit in the body of ``frame`` (past its timestamp and tag)."""
    pos = _frame_position(path, frame) + 8 + 14
    with open(path, "r+b") as f:
        f.seek(pos)
        byte = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([byte ^ 0x01]))


@pytest.mark.parametrize("frame", [HEADER, RECORD, COMMIT_MARKER, ABORT_MARKER])
@pytest.mark.parametrize("isolation", [COMMITTED, UNCOMMITTED])
def test_a_flipped_byte_in_a_transaction_with_frames_after_it_raises_naming_its_offset(
        log, frame, isolation):
    path = _setup(log)
    _flip(path, frame)
    with pytest.raises(CorruptRecordError) as caught:
        _values(log, isolation)
    error = caught.value
    assert (error.stream, error.partition, error.offset) == ("s", 0, frame)
    assert "'s' partition 0 offset %d" % frame in str(error)


def test_a_damaged_commit_marker_never_passes_for_an_open_transaction(log):
    """Without the marker the transaction before it looks open, and a read_committed reader
    would wait for a marker that can only lie beyond the damage: it raises instead."""
    path = _setup(log)
    _flip(path, COMMIT_MARKER)
    reader = log.admin.reader("s", 0, 0, isolation=COMMITTED)
    try:
        with pytest.raises(CorruptRecordError) as caught:
            reader.read_records(100)
        assert caught.value.offset == COMMIT_MARKER
        with pytest.raises(CorruptRecordError):   # and again: it never turns into waiting
            reader.read_records(100)
    finally:
        reader.close()


def test_a_damaged_record_of_an_aborted_batch_is_skipped_with_the_batch(log):
    """read_committed never parses an aborted batch's records (it jumps over the batch), so
    damage there changes nothing it delivers; read_uncommitted meets it and raises."""
    path = _setup(log)
    _flip(path, ABORTED_RECORD)
    assert _values(log) == [b"c1", b"c2", b"c3"]
    with pytest.raises(CorruptRecordError) as caught:
        _values(log, UNCOMMITTED)
    assert caught.value.offset == ABORTED_RECORD


def _cut_before(path: str, frame: int, keep: int = 0) -> None:
    os.truncate(path, _frame_position(path, frame) + keep)


@pytest.mark.parametrize("keep", [0, 5])
def test_a_commit_marker_cut_off_the_end_is_written_again_by_the_next_incarnation(log, keep):
    """The last commit marker is cut off (whole, or torn): its transaction looks open, and the
    next incarnation's first batch would close it as aborted. The producer state records it
    committed, so init writes the commit again: nothing committed is dropped."""
    path = _setup(log)
    _cut_before(path, LAST_COMMIT, keep)
    assert _values(log) == [b"c1", b"c2"]              # held back: c3 is undecided
    producer = _producer(log)
    _send(producer, b"n1")
    _commit(producer)
    producer.stop()
    assert _values(log) == [b"c1", b"c2", b"c3", b"n1"]


def test_a_reader_rolls_forward_a_transaction_whose_commit_marker_was_cut(log):
    """No next incarnation comes: the reader's completion after the timeout decides from the
    producer state, which records the transaction committed: it commits it again."""
    path = _setup(log)
    _cut_before(path, LAST_COMMIT)
    reader = log.admin.reader("s", 0, 0, isolation=COMMITTED)
    try:
        assert [r.value for r in reader.read_records(100)] == [b"c1", b"c2"]
        txn = reader.held_back_by()
    finally:
        reader.close()
    assert txn is not None and txn.first_offset == 7
    done = complete_abandoned(log.settings, "s", 0, txn.producer_id, txn.epoch, txn.sequence)
    assert done.startswith("rolled forward"), done
    assert _values(log) == [b"c1", b"c2", b"c3"]
    state = load_producer_state(log.root, txn.producer_id)
    assert state.last_committed == (txn.epoch, txn.sequence)


def test_a_cut_transaction_that_never_committed_is_still_aborted(log):
    """The same cut, but the transaction was never committed (its producer died with it
    open): the repair must not turn it into a commit."""
    log.create()
    producer = _producer(log)
    _send(producer, b"c1")
    _commit(producer)
    _send(producer, b"x1", b"x2")
    producer.flush()
    _die(producer)
    reader = log.admin.reader("s", 0, 0, isolation=COMMITTED)
    try:
        assert [r.value for r in reader.read_records(100)] == [b"c1"]
        txn = reader.held_back_by()
    finally:
        reader.close()
    done = complete_abandoned(log.settings, "s", 0, txn.producer_id, txn.epoch, txn.sequence)
    assert done.startswith("aborted"), done
    assert _values(log) == [b"c1"]


def test_a_sealed_segment_cut_inside_a_batch_raises_naming_the_offset(make_log):
    log = make_log(segment_bytes="400")
    log.create()
    producer = _producer(log)
    for i in range(6):
        _send(producer, *[b"v%d-%d" % (i, j) + b"." * 20 for j in range(4)])
        _commit(producer)
    producer.stop()
    segments = list_segments(log.pdir())
    assert len(segments) >= 3
    sealed = segments[1]
    os.truncate(sealed.path, _frame_position(sealed.path, 2) + 3)   # inside its first batch
    if os.path.exists(sealed.index_path):
        os.remove(sealed.index_path)                                # as a copy without it
    for isolation in (COMMITTED, UNCOMMITTED):
        with pytest.raises(CorruptRecordError) as caught:
            _values(log, isolation)
        assert caught.value.stream == "s" and caught.value.partition == 0
        assert sealed.base <= caught.value.offset < segments[2].base


def test_a_damaged_producer_state_stops_the_next_incarnation_with_a_typed_error(log):
    """A flipped digit in the producer state (the transaction's number) fails its checksum:
    the next init refuses to guess which transaction to finish."""
    _setup(log)
    producer = _producer(log)
    _send(producer, b"open")
    producer.flush()
    pid = producer.producer_id
    _die(producer)
    path = os.path.join(log.root, ".transactions", f"{pid}.json")
    with open(path, "rb") as f:
        text = f.read()
    at = text.index(b'"sequence": ') + len(b'"sequence": ')
    digit = text[at:at + 1]
    damaged = text[:at] + (b"7" if digit != b"7" else b"8") + text[at + 1:]
    with open(path, "wb") as f:
        f.write(damaged)
    with pytest.raises(ProducerStateCorruptError) as caught:
        _producer(log)
    assert path in str(caught.value) and "checksum" in str(caught.value)
    assert _values(log) == [b"c1", b"c2", b"c3"]      # nothing was finished by guessing
