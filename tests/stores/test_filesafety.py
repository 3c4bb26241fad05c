"""File safety: atomic writes, create-if-absent, checksummed JSON, live pids."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import orjson
import pytest

from weir.stores.filesafety import (atomic_file, atomic_write, json_checksum, pid_alive,
                                    publish_once, remove_durably, remove_stray_temps, seal_json,
                                    temp_path_for, unseal_json)


def test_a_failed_write_leaves_the_old_content_and_no_temp_file(tmp_path):
    target = tmp_path / "state.json"
    atomic_write(target, b"old")
    with pytest.raises(RuntimeError):
        with atomic_file(target) as f:
            f.write(b"half of the new")
            raise RuntimeError("killed mid-write")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["state.json"]


def test_a_write_from_chunks_joins_them(tmp_path):
    atomic_write(tmp_path / "segment", [b"ab", b"", b"cd"])
    assert (tmp_path / "segment").read_bytes() == b"abcd"


def test_a_write_keeps_the_previous_content_when_asked(tmp_path):
    atomic_write(tmp_path / "a", b"one")
    atomic_write(tmp_path / "a", b"two", previous=tmp_path / "a.prev")
    assert (tmp_path / "a").read_bytes() == b"two"
    assert (tmp_path / "a.prev").read_bytes() == b"one"


def test_threads_writing_one_file_at_once_never_share_a_temp_file(tmp_path):
    target = tmp_path / "shared"
    payloads = [bytes([i]) * 100_000 for i in range(8)]
    threads = [threading.Thread(target=atomic_write, args=(target, p)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert target.read_bytes() in payloads
    assert os.listdir(tmp_path) == ["shared"]


def test_of_two_publishers_only_the_first_creates_the_file(tmp_path):
    assert publish_once(tmp_path / "meta", b"first") is True
    assert publish_once(tmp_path / "meta", b"second") is False
    assert (tmp_path / "meta").read_bytes() == b"first"
    assert os.listdir(tmp_path) == ["meta"]


def test_stray_temps_of_a_crashed_writer_are_removed_and_others_kept(tmp_path):
    stray = temp_path_for(tmp_path / "OFFSET")
    stray.write_bytes(b"torn")
    (tmp_path / "OTHER.1.tmp").write_bytes(b"someone else's")
    assert remove_stray_temps(tmp_path, "OFFSET") == [stray]
    assert sorted(os.listdir(tmp_path)) == ["OTHER.1.tmp"]


def test_removing_durably_says_whether_the_file_existed(tmp_path):
    (tmp_path / "f").write_bytes(b"x")
    assert remove_durably(tmp_path / "f") is True
    assert remove_durably(tmp_path / "f") is False


def test_a_sealed_document_round_trips_and_a_flipped_field_fails_its_checksum():
    doc = orjson.loads(orjson.dumps(seal_json({"store": "counts", "offset": 41})))
    assert unseal_json(doc) == {"store": "counts", "offset": 41}
    doc["offset"] = 42
    with pytest.raises(ValueError, match="checksum mismatch"):
        unseal_json(doc)


@pytest.mark.parametrize("doc, reason", [({"offset": 1}, "no checksum"),
                                         ([1, 2], "expected a JSON object")])
def test_a_document_without_a_checksum_or_not_an_object_is_refused(doc, reason):
    with pytest.raises(ValueError, match=reason):
        unseal_json(doc)


def test_the_checksum_ignores_key_order():
    assert json_checksum({"a": 1, "b": 2}) == json_checksum({"b": 2, "a": 1})
    assert len(json_checksum({})) == 8


def test_a_process_that_exited_is_not_alive():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert pid_alive(os.getpid()) is True
    assert pid_alive(child.pid) is False
