import logging

import pytest

from weir.engine.model import IncomingMessageEnvelope, SystemStream, SystemStreamPartition
from weir.engine.consumers.offsets import (
    CaughtUpFilter,
    MissingMetadataError,
    OffsetPolicy,
    offset_policy,
    starting_offsets,
)
from weir.engine.systems.api import OffsetType, PartitionMetadata
from weir.stores.config import Config, ConfigError, find_declared

A0, A1, B0 = (SystemStreamPartition("m", "a", 0), SystemStreamPartition("m", "a", 1),
              SystemStreamPartition("m", "b", 0))
MD = {A0: PartitionMetadata(10, 19, 20), A1: PartitionMetadata(0, 4, 5),
      B0: PartitionMetadata(3, 2, 3)}       # b#0 is empty: everything up to 2 was deleted


def test_checkpointed_offset_resumes_at_the_next_record():
    assert starting_offsets(Config(), [A0], {A0: 14}, MD) == {A0: 15}


def test_default_is_upcoming_without_checkpoint():
    assert starting_offsets(Config(), [A0, A1], {}, MD) == {A0: 20, A1: 5}


@pytest.mark.parametrize("key", [
    "systems.m.streams.a.samza.offset.default",
    "streams.ay.samza.offset.default",
    "systems.m.default.stream.samza.offset.default",
    "systems.m.samza.offset.default",
])
def test_offset_default_oldest_is_read_from_each_config_form(key):
    cfg = Config({key: "OLDEST", "streams.ay.samza.system": "m",
                  "streams.ay.samza.physical.name": "a"})
    assert starting_offsets(cfg, [A0, A1], {}, MD) == {A0: 10, A1: 0}


def test_stream_level_default_wins_over_the_system_level_ones():
    cfg = Config({"systems.m.streams.a.samza.offset.default": "newest",
                  "systems.m.default.stream.samza.offset.default": "oldest",
                  "systems.m.samza.offset.default": "oldest"})
    assert starting_offsets(cfg, [A0], {}, MD) == {A0: 19}


def test_empty_partition_starts_at_upcoming_whatever_the_default():
    for kind in ("oldest", "newest", "upcoming"):
        cfg = Config({"systems.m.default.stream.samza.offset.default": kind})
        assert starting_offsets(cfg, [B0], {}, MD) == {B0: 3}


def test_reset_offset_ignores_the_checkpoint():
    cfg = Config({"systems.m.streams.a.samza.reset.offset": "true",
                  "systems.m.streams.a.samza.offset.default": "oldest"})
    assert starting_offsets(cfg, [A0, B0], {A0: 14, B0: 0}, MD) == {A0: 10, B0: 1}


def test_reset_offset_with_a_bad_value_warns_and_is_false(caplog):
    cfg = Config({"systems.m.streams.a.samza.reset.offset": "maybe"},
                 origins={"systems.m.streams.a.samza.reset.offset": "job.properties:3"})
    with caplog.at_level(logging.WARNING, logger="weir.engine.consumers.offsets"):
        assert offset_policy(cfg, SystemStream("m", "a")) == OffsetPolicy(False, OffsetType.UPCOMING)
    assert "job.properties:3" in caplog.text and "treating it as false" in caplog.text


def test_bad_offset_default_names_key_and_origin():
    cfg = Config({"systems.m.samza.offset.default": "fail"},
                 origins={"systems.m.samza.offset.default": "job.properties:8"})
    with pytest.raises(ConfigError, match=r"systems\.m\.samza\.offset\.default' \(set at job\.properties:8\)"):
        starting_offsets(cfg, [A0], {}, MD)


def test_startpoint_overrides_the_checkpoint():
    assert starting_offsets(Config(), [A0], {A0: 14}, MD, startpoints={A0: 11}) == {A0: 11}


def test_checkpoint_entries_of_other_ssps_are_ignored():
    assert starting_offsets(Config(), [A1], {A0: 14}, MD) == {A1: 5}


def test_missing_metadata_names_the_ssp():
    with pytest.raises(MissingMetadataError, match=r"m\.c#2"):
        starting_offsets(Config(), [SystemStreamPartition("m", "c", 2)], {}, MD)


def test_offset_keys_are_declared():
    for key in ("systems.m.streams.a.samza.reset.offset", "streams.x.samza.reset.offset",
                "systems.m.streams.a.samza.offset.default", "streams.x.samza.offset.default",
                "systems.m.default.stream.samza.offset.default", "systems.m.samza.offset.default"):
        assert find_declared(key) is not None, key


def env(ssp, offset):
    return IncomingMessageEnvelope(ssp, offset, None, b"")


def test_caught_up_filter_skips_envelopes_before_the_task_start():
    f = CaughtUpFilter({A0: 12})
    assert [f.accept(env(A0, o)) for o in (10, 11, 12, 13)] == [False, False, True, True]
    assert f.is_caught_up(A0)


def test_caught_up_filter_stays_caught_up_once_reached():
    f = CaughtUpFilter({A0: 12})
    assert f.accept(env(A0, 15))
    assert f.accept(env(A0, 3))        # never happens in order, but the filter does not regress


def test_caught_up_filter_counts_an_ssp_at_upcoming_as_caught_up_at_start():
    f = CaughtUpFilter({A0: 20, A1: 2}, MD)
    assert f.is_caught_up(A0) and not f.is_caught_up(A1)


def test_caught_up_filter_lets_control_envelopes_through():
    f = CaughtUpFilter({A0: 12})
    assert f.accept(IncomingMessageEnvelope.end_of_stream(A0, 11))
    assert f.is_caught_up(A0)


def test_caught_up_filter_passes_ssps_it_does_not_know():
    assert CaughtUpFilter({A0: 12}).accept(env(B0, 0))
