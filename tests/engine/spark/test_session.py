"""What Weir says before starting Spark when Java is missing or too old (no JVM starts)."""

from __future__ import annotations

import stat

import pytest

from weir.engine.spark.errors import JavaRuntimeError
from weir.engine.spark.session import check_java, java_major, spark_session


def _fake_java(home, version_line: str):
    java = home / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return home


def test_a_java_home_without_java_names_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-such-jdk"))
    with pytest.raises(JavaRuntimeError) as info:
        check_java()
    message = str(info.value)
    assert f"JAVA_HOME={tmp_path / 'no-such-jdk'} has no bin/java" in message
    assert "version 17 or newer" in message and "openjdk-17-jre-headless" in message


def test_no_java_anywhere_names_what_to_install(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(JavaRuntimeError, match="no `java` on PATH and JAVA_HOME is not set"):
        check_java()


def test_a_java_too_old_for_spark_4_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "jdk8", 'java version "1.8.0_402"')))
    with pytest.raises(JavaRuntimeError, match="is Java 8; Spark 4 needs Java 17 or newer"):
        check_java()


def test_spark_session_checks_java_before_starting_a_jvm(tmp_path, monkeypatch):
    pytest.importorskip("pyspark")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-such-jdk"))
    with pytest.raises(JavaRuntimeError, match="has no bin/java"):
        spark_session({"spark.master": "local[1]"})


def test_java_versions_are_read_from_both_version_styles():
    assert java_major('openjdk version "21.0.2" 2024-01-16') == 21
    assert java_major('java version "1.8.0_402"') == 8
    assert java_major("no version here") is None


@pytest.mark.parametrize("master, conf, expected", [
    ("local", {}, 1), ("local[2]", {}, 2), ("local[2,2]", {}, 2), ("local[*]", {}, "cpus"),
    ("local-cluster[2, 1, 1024]", {}, 2),
    ("spark://h:7077", {"spark.executor.instances": "3", "spark.executor.cores": "4"}, 12),
    ("yarn", {}, 7)])
def test_task_slots_are_read_from_the_master_and_executor_keys(master, conf, expected):
    import os

    from weir.engine.spark.session import task_slots

    class Context:                      # the two things task_slots reads of a SparkContext
        defaultParallelism = 7

        def __init__(self):
            self.master = master

        def getConf(self):
            return conf

    class Session:
        sparkContext = Context()

    assert task_slots(Session()) == (os.cpu_count() if expected == "cpus" else expected)
