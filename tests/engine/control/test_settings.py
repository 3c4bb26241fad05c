"""Control settings (SAMZA-REFERENCE 2.10): Samza's keys and defaults, the oddly spelled quorum
alias, Weir's own keys, and the control timer's cadence."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.engine.control.settings import ControlSettings
from weir.engine.control.task_control import TaskControl
from weir.engine.model import SystemStreamPartition
from weir.stores.config import Config, ConfigError


def test_defaults_are_samzas_where_samza_has_the_key():
    s = ControlSettings.from_config(Config({}))
    assert (s.idle_timeout_ms, s.quorum_pct) == (-1, 0.5)
    assert (s.interval_ms, s.linger_ms, s.out_of_orderness_ms) == (200, 50, 0)
    assert s.drain_path is None


def test_samzas_comma_spelled_quorum_key_is_an_alias():
    assert ControlSettings.from_config(
        Config({"task.watermark.quorum.size,percentage": "0.25"})).quorum_pct == 0.25
    both = Config({"task.watermark.quorum.size.percentage": "0.75",
                   "task.watermark.quorum.size,percentage": "0.25"})
    assert ControlSettings.from_config(both).quorum_pct == 0.75


@pytest.mark.parametrize("key,value", [
    ("task.watermark.quorum.size,percentage", "1.5"),
    ("task.watermark.interval.ms", "0"),
    ("task.watermark.max.out.of.orderness.ms", "-1"),
    ("task.intermediate.linger.ms", "0"),
])
def test_bad_values_name_their_key(key, value):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        ControlSettings.from_config(Config({key: value}, origins={key: "job.properties:3"}))


def test_the_drain_file_defaults_to_the_checkpoint_directory(tmp_path):
    s = ControlSettings.from_config(Config({}), checkpoint_dir=tmp_path)
    assert s.drain_path == tmp_path / "drain-request.json"
    s = ControlSettings.from_config(Config({"job.drain.path": "/x/d.json"}), checkpoint_dir=tmp_path)
    assert s.drain_path == Path("/x/d.json")


def test_the_timer_runs_at_the_smaller_of_linger_and_watermark_interval():
    assert ControlSettings(interval_ms=200, linger_ms=50).timer_ms == 50
    assert ControlSettings(interval_ms=20, linger_ms=50).timer_ms == 20


def test_ticks_between_watermark_intervals_only_write_out_what_was_sent():
    now = [1_000]
    ssp = SystemStreamPartition("filelog", "s", 0)
    seen = []
    task = type("T", (), {"process": lambda *a: None,
                          "on_watermark": lambda self, wm, c, co: seen.append(wm)})()
    control = TaskControl("Partition 0", [ssp], settings=ControlSettings(interval_ms=200),
                          task=task, clock_ms=lambda: now[0])

    class Collector:
        sent, written = 0, 0

        def write_through(self):
            self.written += 1
    collector = Collector()
    control.clock(ssp).observe(10)
    control.tick(collector, None)                 # the first tick generates watermarks
    assert seen == [9]
    control.clock(ssp).observe(20)
    collector.sent = 5
    now[0] += 50
    control.tick(collector, None)                 # within the interval: only written out
    assert seen == [9] and collector.written == 1
    control.tick(collector, None)                 # nothing new sent: nothing written
    assert collector.written == 1
    now[0] += 150
    control.tick(collector, None)
    assert seen == [9, 19]
