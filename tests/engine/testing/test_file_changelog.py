"""FileChangelog: offsets, reads, reopen, torn tails and corruption."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from weir.stores.changelog import NO_OFFSET, ChangelogSink, ChangelogSource
from weir.stores.errors import StoreClosedError, StoreError
from weir.testing import FileChangelog


@pytest.fixture
def path(tmp_path):
    return tmp_path / "s.changelog"


def test_is_a_changelog_sink_and_source(path):
    with FileChangelog(path) as log:
        assert isinstance(log, ChangelogSink) and isinstance(log, ChangelogSource)


def test_empty_changelog_has_no_newest_offset(path):
    with FileChangelog(path) as log:
        assert log.newest_offset() == NO_OFFSET
        assert log.oldest_offset() == 0
        assert list(log.read(0, 10)) == []


def test_records_get_consecutive_offsets_across_batches(path):
    with FileChangelog(path) as log:
        log.append(b"a", b"1")
        log.flush()
        log.append_all([(b"b", b"2"), (b"a", None)])
        log.flush()
        log.append(b"c", b"")
        assert log.newest_offset() == 3
        assert list(log.read(0, 3)) == [(0, b"a", b"1"), (1, b"b", b"2"), (2, b"a", None),
                                        (3, b"c", b"")]


@pytest.mark.parametrize("start, end, expected", [
    (1, 2, [1, 2]), (2, 2, [2]), (0, 0, [0]), (3, 100, [3, 4]), (5, 9, []), (3, 1, []),
])
def test_read_returns_the_inclusive_offset_range(path, start, end, expected):
    with FileChangelog(path) as log:
        for i in range(5):
            log.append(b"k%d" % i, b"v")
            if i % 2:
                log.flush()
        assert [o for o, _, _ in log.read(start, end)] == expected


def test_reopen_continues_offsets_and_keeps_records(path):
    with FileChangelog(path) as log:
        log.append_all([(b"a", b"1"), (b"b", b"2")])
    with FileChangelog(path) as log:
        assert log.newest_offset() == 1
        log.append(b"c", b"3")
        log.flush()
    with FileChangelog(path) as log:
        assert list(log.read(0, 2)) == [(0, b"a", b"1"), (1, b"b", b"2"), (2, b"c", b"3")]


def test_appends_are_framed_without_waiting_for_flush(path):
    with FileChangelog(path) as log:
        log.append_all((b"%d" % i, b"x") for i in range(70_000))
        for i in range(5000):
            log.append(b"single", b"%d" % i)
        assert log.size_bytes > 100_000 + 5000 * 6
        assert log.newest_offset() == 74_999
        assert list(log.read(74_999, 74_999)) == [(74_999, b"single", b"4999")]


def test_torn_final_batch_is_truncated_on_open(path):
    with FileChangelog(path) as log:
        log.append(b"a", b"1")
        log.flush()
        log.append(b"b", b"2")
        log.flush()
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 3)  # a crash in the middle of writing the second batch
    with FileChangelog(path) as log:
        assert list(log.read(0, 10)) == [(0, b"a", b"1")]
        assert path.stat().st_size == log.size_bytes < size - 3  # the torn bytes are gone
        log.append(b"c", b"3")
        log.flush()
    with FileChangelog(path) as log:
        assert list(log.read(0, 10)) == [(0, b"a", b"1"), (1, b"c", b"3")]


def test_corrupt_batch_followed_by_valid_data_is_an_error(path):
    with FileChangelog(path) as log:
        for key in (b"a", b"b", b"c"):
            log.append(key, b"value")
            log.flush()
    data = bytearray(path.read_bytes())
    data[8 + 12 + 2] ^= 0xFF  # a payload byte of the first batch
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"corrupt batch at byte 8 .*offset 0"):
        FileChangelog(path)


def _three_batches(path):
    with FileChangelog(path) as log:
        for key in (b"a", b"b", b"c"):
            log.append(key, b"value")
            log.flush()
    return path.stat().st_size


def test_zero_filled_tail_after_a_power_cut_is_truncated(path):
    size = _three_batches(path)
    with open(path, "ab") as f:
        f.write(bytes(4096))  # the file grew but its last block never reached the disk
    with FileChangelog(path) as log:
        assert log.size_bytes == size
        assert [k for _, k, _ in log.read(0, 10)] == [b"a", b"b", b"c"]
        log.append(b"d", b"1")
    with FileChangelog(path) as log:
        assert [k for _, k, _ in log.read(0, 10)] == [b"a", b"b", b"c", b"d"]


def test_torn_batch_whose_payload_became_zeros_is_truncated(path):
    size = _three_batches(path)
    with FileChangelog(path) as log:
        log.append_all([(b"k%d" % i, b"v" * 50) for i in range(100)])
    data = bytearray(path.read_bytes())
    # The header reached the disk; the payload's blocks and the next 4 KiB read back as zeros.
    data[size + 12:] = bytes(len(data) - size - 12 + 4096)
    path.write_bytes(bytes(data))
    with FileChangelog(path) as log:
        assert log.newest_offset() == 2
        assert log.size_bytes == size


def test_corrupt_length_of_a_middle_batch_is_an_error_not_a_torn_tail(path):
    _three_batches(path)
    data = bytearray(path.read_bytes())
    data[8] ^= 0x40  # the first batch's length now points past the end of the file
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"corrupt batch at byte 8 .*offset 0"):
        FileChangelog(path)
    data[8] ^= 0x40
    data[11] ^= 0x01  # ... or one byte off the start of the next batch
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"corrupt batch at byte 8 .*offset 0"):
        FileChangelog(path)


def test_file_torn_while_its_header_was_written_starts_afresh(path):
    path.write_bytes(b"WCLG\x00")
    with FileChangelog(path) as log:
        assert log.newest_offset() == NO_OFFSET
        log.append(b"a", b"1")
    with FileChangelog(path) as log:
        assert list(log.read(0, 0)) == [(0, b"a", b"1")]


def test_a_file_that_is_not_a_changelog_is_refused(path):
    path.write_bytes(b"hello world, not a changelog")
    with pytest.raises(StoreError, match="not a Weir file changelog"):
        FileChangelog(path)


def test_flushed_records_survive_sigkill(path):
    script = textwrap.dedent(f"""
        import os, signal
        from weir.testing import FileChangelog
        log = FileChangelog({str(path)!r})
        log.append_all([(b"k%d" % i, b"v") for i in range(100)])
        log.flush()
        log.append(b"lost", b"never flushed")
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd(), timeout=60)
    assert proc.returncode == -9
    with FileChangelog(path) as log:
        assert log.newest_offset() == 99
        assert [k for _, k, _ in log.read(98, 99)] == [b"k98", b"k99"]


def test_use_after_close_is_an_error(path):
    log = FileChangelog(path)
    log.close()
    log.close()
    for use in (log.flush, lambda: log.append(b"k", b"v"), lambda: log.append_all([]),
                lambda: log.read(0, 0)):
        with pytest.raises(StoreClosedError, match="after close"):
            use()
