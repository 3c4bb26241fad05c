"""Control settings (SAMZA-REFERENCE 2.10): Samza's keys and defaults, the oddly spelled quorum
alias, Weir's own keys, and what the control timer does."""

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
    assert (s.interval_ms, s.out_of_orderness_ms) == (200, 0)
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
])
def test_bad_values_name_their_key(key, value):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        ControlSettings.from_config(Config({key: value}, origins={key: "job.properties:3"}))


def test_the_drain_file_defaults_to_the_checkpoint_directory(tmp_path):
    s = ControlSettings.from_config(Config({}), checkpoint_dir=tmp_path)
    assert s.drain_path == tmp_path / "drain-request.json"
    s = ControlSettings.from_config(Config({"job.drain.path": "/x/d.json"}), checkpoint_dir=tmp_path)
    assert s.drain_path == Path("/x/d.json")


def test_every_tick_of_the_control_timer_generates_the_watermarks():
    now = [1_000]
    ssp = SystemStreamPartition("filelog", "s", 0)
    seen = []
    task = type("T", (), {"process": lambda *a: None,
                          "on_watermark": lambda self, wm, c, co: seen.append(wm)})()
    control = TaskControl("Partition 0", [ssp], settings=ControlSettings(interval_ms=200),
                          task=task, clock_ms=lambda: now[0])
    control.clock(ssp).observe(10)
    control.tick(None, None)
    assert seen == [9]
    control.clock(ssp).observe(20)
    now[0] += 150                                 # the timer's period, however it jitters
    control.tick(None, None)
    assert seen == [9, 19]
    control.tick(None, None)                      # no advance: nothing announced
    assert seen == [9, 19]
