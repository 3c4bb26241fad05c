"""YAML configs are strict where YAML is lenient: a key set twice and a document that is not a
mapping are config errors naming the file, the line and the key (PyYAML keeps the last of two
keys without a word, and a top-level list became a key with an empty name)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from weir.engine.config.job import load_config
from weir.stores.config import ConfigError

ROOT = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_key_set_twice_names_both_lines_and_the_key(tmp_path):
    path = write(tmp_path, "job.name: wc\ntask.commit.ms: 5000\njob.name: other\n")

    with pytest.raises(ConfigError) as info:
        load_config(path)

    assert info.value.key == "job.name" and info.value.origin == f"{path}:3"
    assert f"config key 'job.name' (set at {path}:3): is set twice" in str(info.value)
    assert f"{path}:1" in str(info.value)


def test_a_key_set_twice_through_different_nesting_is_refused(tmp_path):
    path = write(tmp_path, "task.commit.ms: 5000\ntask:\n  commit.ms: 1000\n")

    with pytest.raises(ConfigError, match=r"'task.commit.ms' \(set at .*job.yaml:3\): is set "
                                          r"twice.*job.yaml:1"):
        load_config(path)


def test_a_key_of_a_merged_anchor_may_be_overridden_before_or_after_the_merge(tmp_path):
    cfg = load_config(write(tmp_path, "base: &b {factory: rocksdb, key.serde: string}\n"
                                      "stores:\n  a:\n    key.serde: json\n    <<: *b\n"
                                      "  b:\n    <<: *b\n    key.serde: long\n"))

    assert cfg["stores.a.key.serde"] == "json" and cfg["stores.b.key.serde"] == "long"
    assert cfg["stores.a.factory"] == cfg["stores.b.factory"] == "rocksdb"


@pytest.mark.parametrize("text, what", [("- job.name: wc\n- task.commit.ms: 5\n", "a list"),
                                        ("just a string\n", "a scalar")])
def test_a_document_that_is_not_a_mapping_is_refused_with_its_line(tmp_path, text, what):
    path = write(tmp_path, text)

    with pytest.raises(ConfigError) as info:
        load_config(path)

    assert str(info.value) == (f"{path}:1: a YAML config must be a mapping of keys to values, "
                               f"not {what}")


def test_a_syntax_error_names_the_file_and_line_once(tmp_path):
    path = write(tmp_path, "job:\n  name: [wc\n")

    with pytest.raises(ConfigError) as info:
        load_config(path)

    assert str(info.value).startswith(f"{path}:3: invalid YAML: ")
    assert str(info.value).count(str(path)) == 1


@pytest.mark.parametrize("name, text, line", [
    ("job.properties", "job.name=wc\ntask.class=a:B\ntask.inputs=filelog.words\n"
                       "task.commit.ms={value}\n", 4),
    ("job.yaml", "job.name: wc\ntask:\n  class: a:B\n  inputs: filelog.words\n"
                 "  commit.ms: {value}\n", 5),
])
@pytest.mark.parametrize("value", ["-5", str(10 ** 23)])
def test_weir_run_refuses_an_out_of_range_commit_interval_naming_file_line_and_key(
        tmp_path, name, text, line, value):
    write(tmp_path, text.format(value=value), name)
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    done = subprocess.run([sys.executable, "-m", "weir", "run", name], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)

    assert done.returncode == 2, done.stdout + done.stderr
    assert (f"weir: error: config key 'task.commit.ms' (set at {name}:{line}): bad value "
            f"'{value}': expected an integer") in done.stderr
    assert not (tmp_path / "weir-data").exists()  # nothing ran
