"""weir.engine.config.job: reading .properties and YAML files, overrides, checks, job-level settings."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir import stores
from weir.engine.cli import main
from weir.engine.config.check import UnknownSamzaKeyError
from weir.engine.config.job import (
    ConfigFormat,
    JobConfig,
    StoreBase,
    WarningKind,
    apply_overrides,
    load_config,
    parse_override,
    validate_config,
    warn_unknown_keys,
)
from weir.engine.model import SystemStream
from weir.stores.config import Config, ConfigError, declare
from weir.stores.spec import StoreSpec


@pytest.fixture
def registry(monkeypatch):
    """A private copy of the key registry, so test declarations never leak into the docs."""
    monkeypatch.setattr(stores.config, "_REGISTRY", dict(stores.config._REGISTRY))
    return stores.config._REGISTRY


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def props(tmp_path: Path, text: str) -> Config:
    return load_config(write(tmp_path, "job.properties", text))


# -- .properties --------------------------------------------------------------------------------

def test_properties_accept_equals_colon_and_whitespace_separators(tmp_path):
    cfg = props(tmp_path, "a=1\nb : 2\nc 3\n  d\t=\t4\ne:5\nf   \t  6\n")
    assert dict(cfg) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6"}


def test_properties_skip_comments_and_blank_lines(tmp_path):
    cfg = props(tmp_path, "# comment\n! also a comment\n   # indented comment\n\n   \n\t\na=1\n")
    assert dict(cfg) == {"a": "1"}


def test_comment_line_ending_in_backslash_does_not_continue(tmp_path):
    cfg = props(tmp_path, "# comment \\\na=1\n")
    assert dict(cfg) == {"a": "1"}


def test_backslash_continuation_joins_lines_and_drops_leading_whitespace(tmp_path):
    cfg = props(tmp_path, "task.inputs = filelog.a, \\\n      filelog.b,\\\n\t# not a comment\n")
    assert cfg["task.inputs"] == "filelog.a, filelog.b,# not a comment"


def test_even_number_of_backslashes_is_a_literal_backslash_not_a_continuation(tmp_path):
    cfg = props(tmp_path, "path=C:\\\\dir\\\\\nnext=1\n")
    assert cfg["path"] == "C:\\dir\\"
    assert cfg["next"] == "1"


def test_blank_continuation_line_ends_the_entry(tmp_path):
    cfg = props(tmp_path, "a=x\\\n   \nb=y\n")
    assert dict(cfg) == {"a": "x", "b": "y"}


def test_trailing_backslash_at_end_of_file_is_dropped(tmp_path):
    cfg = props(tmp_path, "a=x\\")
    assert cfg["a"] == "x"


def test_escapes_are_decoded_in_keys_and_values(tmp_path):
    text = ("caf\\u00e9=na\\u00efve\nsep\\=key\\:x\\ y=v\ntabs=a\\tb\\nc\\rd\\fe\n"
            "other=\\q\\#\\!\nemoji=\\ud83d\\ude00\n")
    cfg = props(tmp_path, text)
    assert cfg["café"] == "naïve"
    assert cfg["sep=key:x y"] == "v"
    assert cfg["tabs"] == "a\tb\nc\rd\fe"
    assert cfg["other"] == "q#!"
    assert cfg["emoji"] == "\U0001F600"


def test_value_keeps_trailing_whitespace_and_later_separators(tmp_path):
    cfg = props(tmp_path, "a=b=c\nd = e : f  \ng==h\n")
    assert cfg["a"] == "b=c"
    assert cfg["d"] == "e : f  "
    assert cfg["g"] == "=h"


def test_key_without_value_maps_to_empty_string(tmp_path):
    cfg = props(tmp_path, "lonely\nspaced   \n")
    assert dict(cfg) == {"lonely": "", "spaced": ""}


def test_crlf_and_cr_line_endings_are_lines(tmp_path):
    cfg = props(tmp_path, "a=1\r\nb=2\rc=3\\\r\n  4\n")
    assert dict(cfg) == {"a": "1", "b": "2", "c": "34"}
    assert cfg.origin("c").endswith(":3")


def test_form_feed_is_whitespace_not_a_line_break(tmp_path):
    cfg = props(tmp_path, "\fa\f=\fb\n")
    assert dict(cfg) == {"a": "b"}


def test_duplicate_keys_last_wins_with_its_line(tmp_path):
    cfg = props(tmp_path, "a=1\nb=2\na=3\n")
    assert cfg["a"] == "3"
    assert cfg.origin("a").endswith("job.properties:3")


def test_origin_is_file_and_line_where_the_entry_starts(tmp_path):
    path = write(tmp_path, "job.properties", "\n# c\njob.name=wc\nlong=a\\\n  b\\\n  c\nz=1\n")
    cfg = load_config(path)
    assert cfg.origin("job.name") == f"{path}:3"
    assert cfg.origin("long") == f"{path}:4"
    assert cfg.origin("z") == f"{path}:7"


def test_malformed_unicode_escape_names_file_and_line(tmp_path):
    with pytest.raises(ConfigError) as err:
        props(tmp_path, "ok=1\nbad=\\u00zz\n")
    assert "job.properties:2" in str(err.value)
    assert "\\uXXXX" in str(err.value)


def test_empty_key_is_rejected_with_its_line(tmp_path):
    with pytest.raises(ConfigError, match=r"job.properties:1.*empty key"):
        props(tmp_path, "=value\n")


def test_latin1_file_is_read_as_java_does(tmp_path):
    cfg = load_config(write(tmp_path, "job.properties", "name=caf\xe9\n".encode("latin-1")))
    assert cfg["name"] == "café"


def _java_escape(text: str, *, key: bool) -> str:
    """Properties.saveConvert: what java.util.Properties.store writes."""
    out = []
    for i, ch in enumerate(text):
        if ch == " " and (key or i == 0):
            out.append("\\ ")
        elif ch in "\\=:#!":
            out.append("\\" + ch)
        elif ch in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[ch])
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.append("".join(f"\\u{u:04x}" for u in _utf16(ch)))
        else:
            out.append(ch)
    return "".join(out)


def _utf16(ch: str) -> list[int]:
    data = ch.encode("utf-16-be")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@given(entries=st.dictionaries(_text.filter(bool), _text, max_size=6))
def test_reading_what_java_properties_store_writes_gives_the_same_entries(tmp_path_factory, entries):
    text = "".join(f"{_java_escape(k, key=True)}={_java_escape(v, key=False)}\n"
                   for k, v in entries.items())
    path = write(tmp_path_factory.mktemp("p"), "x.properties", text)
    assert dict(load_config(path)) == entries


# -- YAML ---------------------------------------------------------------------------------------

def test_yaml_nested_mappings_flatten_to_dotted_keys_with_their_lines(tmp_path):
    path = write(tmp_path, "job.yaml", "job:\n  name: wc\n  container.count: 2\n"
                                       "stores:\n  counts:\n    factory: rocksdb\n")
    cfg = load_config(path)
    assert dict(cfg) == {"job.name": "wc", "job.container.count": "2",
                         "stores.counts.factory": "rocksdb"}
    assert cfg.origin("stores.counts.factory") == f"{path}:6"


def test_yaml_lists_join_with_commas_and_booleans_become_true_false(tmp_path):
    cfg = load_config(write(tmp_path, "job.yml",
                            "task:\n  inputs:\n    - filelog.a\n    - filelog.b\n"
                            "flags: {x: yes, y: Off, z: true}\n"))
    assert cfg["task.inputs"] == "filelog.a,filelog.b"
    assert (cfg["flags.x"], cfg["flags.y"], cfg["flags.z"]) == ("true", "false", "true")


def test_yaml_scalars_keep_their_text_and_null_is_empty(tmp_path):
    cfg = load_config(write(tmp_path, "job.yaml",
                            "ratio: 0.50\nsize: 1_000\nquoted: '007'\nnothing:\ntilde: ~\non: 1\n"))
    assert dict(cfg) == {"ratio": "0.50", "size": "1_000", "quoted": "007", "nothing": "",
                         "tilde": "", "on": "1"}


def test_yaml_merge_keys_copy_the_anchor(tmp_path):
    cfg = load_config(write(tmp_path, "job.yaml",
                            "base: &b {factory: rocksdb, key.serde: string}\n"
                            "stores:\n  counts:\n    <<: *b\n    key.serde: json\n"))
    assert cfg["stores.counts.factory"] == "rocksdb"
    assert cfg["stores.counts.key.serde"] == "json"


def test_invalid_yaml_reports_file_and_line(tmp_path):
    with pytest.raises(ConfigError, match=r"job.yaml:3: invalid YAML: mapping values"):
        load_config(write(tmp_path, "job.yaml", "a: 1\nb: 2\n  c: 3\n"))
    with pytest.raises(ConfigError, match=r"flow sequence started at line 3"):
        load_config(write(tmp_path, "job.yaml", "a: 1\nb: 2\nc: [unclosed\n"))


def test_yaml_must_be_a_mapping(tmp_path):
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(write(tmp_path, "job.yaml", "just a string\n"))


def test_yaml_list_of_mappings_is_rejected_with_its_line(tmp_path):
    with pytest.raises(ConfigError, match=r"task.inputs.*job.yaml:3"):
        load_config(write(tmp_path, "job.yaml", "task:\n  inputs:\n    - {a: 1}\n"))


def test_empty_yaml_is_an_empty_config(tmp_path):
    assert dict(load_config(write(tmp_path, "job.yaml", "# nothing\n"))) == {}


def test_format_is_chosen_by_suffix():
    assert ConfigFormat.of("job.YML") is ConfigFormat.YAML
    assert ConfigFormat.of("job.yaml") is ConfigFormat.YAML
    assert ConfigFormat.of("job.properties") is ConfigFormat.PROPERTIES
    assert ConfigFormat.of("job.conf") is ConfigFormat.PROPERTIES


# -- overrides and loading ----------------------------------------------------------------------

def test_set_overrides_win_over_the_file_and_have_origin_set(tmp_path):
    path = write(tmp_path, "job.properties", "job.name=wc\njob.id=1\n")
    cfg = load_config(path, ["job.id=2", "extra = x=y", "job.id=3"])
    assert cfg["job.id"] == "3" and cfg.origin("job.id") == "--set"
    assert cfg["extra"] == "x=y"
    assert cfg.origin("job.name") == f"{path}:1"


@pytest.mark.parametrize("bad", ["no-equals", "=value", "  = v"])
def test_malformed_override_raises_config_error(bad):
    with pytest.raises(ConfigError, match="malformed override.*key=value"):
        parse_override(bad)


def test_apply_overrides_without_overrides_returns_the_config():
    cfg = Config({"a": "1"})
    assert apply_overrides(cfg, []) is cfg


def test_missing_file_raises_config_error_naming_it(tmp_path):
    with pytest.raises(ConfigError, match="nope.properties' not found"):
        load_config(tmp_path / "nope.properties")


# -- validation ---------------------------------------------------------------------------------

def test_bad_value_fails_early_with_key_file_line_value_and_allowed(tmp_path):
    path = write(tmp_path, "job.properties", "job.name=wc\njob.container.count=two\n")
    with pytest.raises(ConfigError) as err:
        validate_config(load_config(path))
    msg = str(err.value)
    assert "job.container.count" in msg and f"{path}:2" in msg and "'two'" in msg
    assert "integer" in msg


def test_bad_choice_lists_the_allowed_values(tmp_path):
    path = write(tmp_path, "job.properties", "job.systemstreampartition.grouper.factory=roundrobin\n")
    with pytest.raises(ConfigError, match=r"job.properties:1.*'roundrobin'.*partition, ssp"):
        validate_config(load_config(path))


def test_unknown_key_warns_with_origin_and_did_you_mean(tmp_path):
    path = write(tmp_path, "job.properties", "job.name=wc\njob.contianer.count=2\n")
    (warning,) = validate_config(load_config(path))
    assert warning.kind is WarningKind.UNKNOWN_KEY
    assert warning.key == "job.contianer.count"
    assert warning.origin == f"{path}:2"
    assert warning.suggestion == "job.container.count"
    assert "did you mean 'job.container.count'?" in warning.message


def test_did_you_mean_fills_placeholders_from_the_key(registry):
    declare("stores.<store>.testonly.staleness.ms", int, 0, "t", component="test")
    declare("systems.<system>.streams.<stream>.samza.testprio", int, -1, "t", component="test")
    cfg = Config({"stores.my-counts.testonly.stalenes.ms": "5"})
    suggestions = {w.key: w.suggestion for w in validate_config(cfg, load_declarations=False)}
    assert suggestions == {
        "stores.my-counts.testonly.stalenes.ms": "stores.my-counts.testonly.staleness.ms"}
    with pytest.raises(UnknownSamzaKeyError) as err:
        validate_config(Config({"systems.fl.streams.a.b.samza.testpiro": "1"}),
                        load_declarations=False)
    assert [w.suggestion for w in err.value.unknown] == ["systems.fl.streams.a.b.samza.testprio"]


def test_unknown_key_far_from_any_declared_key_gets_no_suggestion():
    (warning,) = validate_config(Config({"task.zzzzzzzzzzzzzzzzzz": "1"}))
    assert warning.suggestion is None
    assert "docs/CONFIG.md" in warning.message


def test_stream_property_declared_in_one_spelling_is_known_in_all_three(registry):
    declare("systems.<system>.streams.<stream>.samza.testprop", int, 0, "t", component="test")
    ok = Config({"streams.ids.samza.testprop": "1",
                 "systems.fl.default.stream.samza.testprop": "2",
                 "systems.fl.streams.words.samza.testprop": "3"})
    assert validate_config(ok, load_declarations=False) == []
    with pytest.raises(ConfigError, match="streams.ids.samza.testprop"):
        validate_config(Config({"streams.ids.samza.testprop": "x"}), load_declarations=False)


def test_user_stream_properties_and_foreign_prefixes_are_not_warned():
    cfg = Config({"systems.filelog.streams.words.my.own.prop": "1",
                  "systems.filelog.default.stream.retention": "1",
                  "streams.words.color": "blue",
                  "yarn.package.path": "x", "metrics.reporters": "snapshot", "app.x": "1"})
    assert validate_config(cfg) == []


def test_unknown_samza_namespaced_stream_properties_are_errors():
    cfg = Config({"streams.words.samza.bootstrapp": "true",
                  "systems.filelog.default.stream.samza.nonsense": "1"})
    with pytest.raises(UnknownSamzaKeyError) as err:
        validate_config(cfg)
    assert {w.key for w in err.value.unknown} == set(cfg)


@pytest.mark.parametrize("key", [
    "systems.filelog.default.stream.samza.offset.defualt",
    "systems.filelog.streams.words.samza.offset.defualt",
    "streams.words.samza.offset.defualt",
])
def test_a_misspelt_offset_default_is_an_error_naming_file_line_and_the_right_key(tmp_path,
                                                                                  key):
    path = write(tmp_path, "job.properties", f"job.name=wc\n{key}=oldest\n")
    with pytest.raises(ConfigError) as err:
        validate_config(load_config(path))
    message = str(err.value)
    assert key in message and f"{path}:2" in message
    assert f"did you mean '{key.replace('defualt', 'default')}'?" in message


def test_a_misspelt_system_samza_key_is_an_error(tmp_path):
    path = write(tmp_path, "job.properties", "job.name=wc\nsystems.filelog.samza.msg.sered=json\n")
    with pytest.raises(UnknownSamzaKeyError, match=r"systems.filelog.samza.msg.serde"):
        validate_config(load_config(path))


def test_keys_of_user_systems_are_theirs_but_samza_keys_are_checked():
    cfg = Config({"systems.mine.samza.factory": "my_pkg.systems:MySystemFactory",
                  "systems.mine.host": "example.org",
                  "systems.filelog.samza.factory": "filelog",
                  "systems.filelog.rooot": "/tmp"})
    keys = {w.key for w in validate_config(cfg)}
    assert "systems.mine.host" not in keys
    assert "systems.filelog.rooot" in keys
    with pytest.raises(UnknownSamzaKeyError, match="systems.mine.samza.whatever"):
        validate_config(cfg.merged({"systems.mine.samza.whatever": "1"}, origin="--set"))


def test_warn_unknown_keys_logs_each_warning(caplog):
    logger = logging.getLogger("test.config")
    with caplog.at_level(logging.WARNING, logger="test.config"):
        warnings = warn_unknown_keys(Config({"task.foo.bar": "1", "job.name": "wc"},
                                            origins={"task.foo.bar": "j.properties:9"}), logger)
    assert len(warnings) == 1
    assert "task.foo.bar" in caplog.text and "j.properties:9" in caplog.text


# -- job-level settings -------------------------------------------------------------------------

def test_job_config_requires_job_name():
    with pytest.raises(ConfigError, match="job.name.*required"):
        JobConfig.from_config(Config({}), environ={})


def test_job_config_defaults_put_every_path_under_one_directory_per_job(tmp_path):
    job = JobConfig.from_config(Config({"job.name": "wc"}), cwd=tmp_path, environ={})
    assert (job.name, job.id) == ("wc", "1")
    root = tmp_path / "weir-data" / "wc-1"
    assert job.data_dir == root
    assert job.logged_store_base_dir == root / "state"
    assert job.non_logged_store_base_dir == root / "state"
    assert job.checkpoint_dir == root / "checkpoints"
    assert job.changelog_system is None and job.coordinator_system is None


def test_two_ids_of_one_job_name_get_separate_data_directories(tmp_path):
    one = JobConfig.from_config(Config({"job.name": "wc"}), cwd=tmp_path, environ={})
    two = JobConfig.from_config(Config({"job.name": "wc", "job.id": "2"}), cwd=tmp_path,
                                environ={})
    assert one.data_dir != two.data_dir
    assert two.checkpoint_dir == tmp_path / "weir-data/wc-2/checkpoints"


def test_job_data_dir_moves_every_default_path_and_explicit_keys_still_win(tmp_path):
    cfg = Config({"job.name": "wc", "job.data.dir": "jobs/wc",
                  "task.checkpoint.path": "/cp"})
    job = JobConfig.from_config(cfg, cwd=tmp_path, environ={})
    assert job.data_dir == tmp_path / "jobs/wc"
    assert job.logged_store_base_dir == tmp_path / "jobs/wc/state"
    assert job.non_logged_store_base_dir == tmp_path / "jobs/wc/state"
    assert job.checkpoint_dir == Path("/cp")


def test_a_job_name_with_a_path_separator_needs_an_explicit_data_dir(tmp_path):
    with pytest.raises(ConfigError, match="job.name.*cannot name a directory.*job.data.dir"):
        JobConfig.from_config(Config({"job.name": "a/b"}), cwd=tmp_path, environ={})
    job = JobConfig.from_config(Config({"job.name": "a/b", "job.data.dir": "ab"}),
                                cwd=tmp_path, environ={})
    assert job.checkpoint_dir == tmp_path / "ab/checkpoints"


def test_an_empty_directory_key_is_refused_with_its_origin(tmp_path):
    cfg = Config({"job.name": "wc", "task.checkpoint.path": " "},
                 origins={"task.checkpoint.path": "job.properties:4"})
    with pytest.raises(ConfigError, match="task.checkpoint.path.*job.properties:4"):
        JobConfig.from_config(cfg, cwd=tmp_path, environ={})


def test_logged_store_base_dir_env_var_wins_and_is_per_job(tmp_path):
    cfg = Config({"job.name": "wc", "job.id": "2", "job.logged.store.base.dir": "/elsewhere",
                  "job.non-logged.store.base.dir": "scratch"})
    job = JobConfig.from_config(cfg, cwd=tmp_path, environ={"LOGGED_STORE_BASE_DIR": "/data"})
    assert job.logged_store_base_dir == Path("/data/wc-2")
    assert job.non_logged_store_base_dir == tmp_path / "scratch"
    no_env = JobConfig.from_config(cfg, cwd=tmp_path, environ={})
    assert no_env.logged_store_base_dir == Path("/elsewhere")


def test_store_dir_is_base_store_and_task_with_underscores(tmp_path):
    job = JobConfig.from_config(Config({"job.name": "wc", "job.non-logged.store.base.dir": "nl"}),
                                cwd=tmp_path, environ={})
    assert job.store_dir("counts", "Partition 0", StoreBase.LOGGED) == \
        tmp_path / "weir-data/wc-1/state/counts/Partition_0"
    assert job.store_dir("cache", "SystemStreamPartition [a, b, 1]", StoreBase.NON_LOGGED) == \
        tmp_path / "nl/cache/SystemStreamPartition_[a,_b,_1]"


def test_changelog_stream_from_system_stream_or_bare_name():
    job = JobConfig.from_config(Config({"job.name": "wc", "job.default.system": "filelog",
                                        "job.changelog.system": "logs"}), environ={})
    assert job.changelog_stream("s", "other.s-log") == SystemStream("other", "s-log")
    assert job.changelog_stream("s", "s-log") == SystemStream("logs", "s-log")
    fallback = JobConfig.from_config(Config({"job.name": "wc", "job.default.system": "filelog"}),
                                     environ={})
    assert fallback.changelog_stream("s", "s-log") == SystemStream("filelog", "s-log")


def test_bare_changelog_without_any_system_names_the_store_key():
    job = JobConfig.from_config(Config({"job.name": "wc"}), environ={})
    with pytest.raises(ConfigError, match=r"stores.counts.changelog.*job.properties:4.*job.changelog.system"):
        job.changelog_stream("counts", "counts-log", origin="job.properties:4")


def test_coordinator_stream_name_and_system():
    job = JobConfig.from_config(Config({"job.name": "test_job", "job.default.system": "fl"}),
                                environ={})
    assert job.coordinator_stream == "__samza_coordinator_test-job_1"
    assert job.require_coordinator_system() == "fl"
    bare = JobConfig.from_config(Config({"job.name": "wc"}), environ={})
    with pytest.raises(ConfigError, match="job.coordinator.system"):
        bare.require_coordinator_system()


# -- weir config show ---------------------------------------------------------------------------

_TASK = "task.class=tests.engine._jobs:PassThrough\n"


def test_cli_show_prints_keys_values_origins_and_warnings(tmp_path, capsys):
    path = write(tmp_path, "job.properties", "job.name=wc\njob.contianer.count=2\n" + _TASK)
    assert main(["config", "show", str(path), "--set", "job.id=9"]) == 0
    out = capsys.readouterr().out
    assert "job.name" in out and f"{path}:1" in out
    assert "job.id" in out and "--set" in out
    assert "did you mean 'job.container.count'?" in out
    assert "4 keys" in out and "1 warning" in out


def test_cli_show_defaults_lists_unset_declared_keys(tmp_path, capsys):
    path = write(tmp_path, "job.properties", "job.name=wc\n" + _TASK)
    assert main(["config", "show", str(path), "--defaults"]) == 0
    out = capsys.readouterr().out
    assert "job.container.count" in out and "default" in out


def test_cli_show_strict_fails_on_warnings(tmp_path, capsys):
    path = write(tmp_path, "job.properties", "job.name=wc\njob.nmae=wc\n" + _TASK)
    assert main(["config", "show", str(path), "--strict"]) == 1


def test_cli_show_bad_value_exits_2_naming_key_and_line(tmp_path, capsys):
    path = write(tmp_path, "job.yaml", "job:\n  name: wc\n  container:\n    count: lots\n")
    assert main(["config", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert "job.container.count" in err and f"{path}:4" in err


# -- store keys: one message ---------------------------------------------------------------------

_STORE = {"job.name": "wc", "stores.counts.factory": "memory", "stores.counts.key.serde": "string",
          "stores.counts.msg.serde": "int64"}


def test_an_unknown_key_of_a_defined_store_is_an_error_naming_key_origin_and_the_right_key(caplog):
    cfg = Config({**_STORE, "stores.counts.cache.size": "10"},
                 origins={"stores.counts.cache.size": "job.properties:7"})
    with caplog.at_level(logging.WARNING), \
            pytest.raises(ConfigError, match="stores.counts.cache.size.*job.properties:7.*"
                                             "did you mean stores.counts.object.cache.size"):
        warn_unknown_keys(cfg)
    assert "is ignored" not in caplog.text  # no warning that contradicts the error


def test_the_config_check_and_the_store_spec_refuse_an_unknown_store_key_alike():
    cfg = Config({**_STORE, "stores.counts.cache.size": "10"})
    with pytest.raises(ConfigError) as from_check:
        validate_config(cfg)
    with pytest.raises(ConfigError) as from_spec:
        StoreSpec.from_config(cfg, "counts")
    assert str(from_check.value) == str(from_spec.value)


def test_a_key_of_a_store_without_factory_is_ignored_with_a_warning_that_says_why():
    (warning,) = validate_config(Config({**_STORE, "stores.count.changelog": "filelog.c"}))
    assert warning.kind is WarningKind.UNDEFINED_STORE
    assert "is ignored: no store 'count' is defined (stores.count.factory is not set)" in \
        warning.message
    assert "did you mean 'stores.counts.changelog'?" in warning.message
    (alone,) = validate_config(Config({"stores.other.changelog": "filelog.c"}))
    assert "set stores.other.factory (rocksdb, lmdb or memory)" in alone.message
