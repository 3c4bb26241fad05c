"""The ``.weirsnap`` file of ``weir state export`` / ``import``: what is written is read back
whole, and a file that is not a snapshot of this format is refused before any of it is used."""

from __future__ import annotations

import msgpack
import pytest
import zstandard
from hypothesis import given, settings, strategies as st

from weir.engine.cli.state.snapshot_file import (CHUNK, SNAPSHOT_FORMAT, load_snapshot,
                                                 write_snapshot)
from weir.recovery.errors import RecoveryError

_pairs = st.dictionaries(st.binary(max_size=12), st.binary(max_size=40), max_size=30).map(
    lambda d: sorted(d.items()))


@settings(max_examples=40, deadline=None)
@given(stores=st.lists(_pairs, max_size=4))
def test_a_written_snapshot_reads_back_every_store_and_pair(tmp_path_factory, stores):
    out = tmp_path_factory.mktemp("snap") / "job.weirsnap"
    metas = [{"store": f"s{i}", "task": "Partition 0", "records": len(p), "from": "changelog"}
             for i, p in enumerate(stores)]
    write_snapshot(out, {"job": "j", "checkpoints": {}}, zip(metas, stores))
    header, read = load_snapshot(out)
    assert (header["kind"], header["format"], header["job"]) == (
        "weir-state-snapshot", SNAPSHOT_FORMAT, "j")
    assert [(meta, [tuple(p) for p in pairs]) for meta, pairs in read] == list(zip(metas, stores))


def test_a_store_larger_than_one_chunk_reads_back_in_order(tmp_path):
    pairs = [(i.to_bytes(4, "big"), b"v") for i in range(CHUNK * 2 + 3)]
    out = tmp_path / "big.weirsnap"
    write_snapshot(out, {"checkpoints": {}},
                   [({"store": "s", "task": "t", "records": len(pairs)}, pairs)])
    (_, [(_, read)]) = load_snapshot(out)
    assert read == pairs


def _raw(path, *items) -> None:
    packer = msgpack.Packer(use_bin_type=True)
    path.write_bytes(zstandard.ZstdCompressor().compress(b"".join(map(packer.pack, items))))


def test_a_file_of_another_kind_is_refused(tmp_path):
    path = tmp_path / "other.weirsnap"
    _raw(path, {"kind": "something-else"})
    with pytest.raises(RecoveryError, match="is not a weir state snapshot; nothing was imported"):
        load_snapshot(path)


def test_a_snapshot_of_another_format_is_refused_naming_both(tmp_path):
    path = tmp_path / "future.weirsnap"
    _raw(path, {"kind": "weir-state-snapshot", "format": SNAPSHOT_FORMAT + 1})
    with pytest.raises(RecoveryError, match=f"format {SNAPSHOT_FORMAT + 1}, this weir reads "
                                            f"format {SNAPSHOT_FORMAT}"):
        load_snapshot(path)


def test_a_snapshot_whose_checksum_does_not_match_is_refused(tmp_path):
    path = tmp_path / "flipped.weirsnap"
    _raw(path, {"kind": "weir-state-snapshot", "format": SNAPSHOT_FORMAT},
         {"store": "s", "task": "t", "records": 1}, [[b"k", b"v"]],
         {"end": True, "records": 1, "crc32c": 12345})
    with pytest.raises(RecoveryError, match="checksum or record count does not match"):
        load_snapshot(path)


def test_a_store_with_fewer_pairs_than_its_meta_says_is_refused(tmp_path):
    import crc32c
    path = tmp_path / "short.weirsnap"
    _raw(path, {"kind": "weir-state-snapshot", "format": SNAPSHOT_FORMAT},
         {"store": "s", "task": "t", "records": 2}, [[b"k", b"v"]],
         {"end": True, "records": 1, "crc32c": crc32c.crc32c(b"v", crc32c.crc32c(b"k"))})
    with pytest.raises(RecoveryError, match="store 's' of task 't' is incomplete"):
        load_snapshot(path)
