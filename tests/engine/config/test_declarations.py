"""The generated key index: it must match the code, it finds the declaring module of every
spelling of a key, and a config check imports only those modules (with every declaration as
the fallback whenever the check has anything to say)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from weir.engine.config.declarations import INDEX_PATH, _Index, modules_declaring, render_index
from weir.engine.config.job import load_all_declarations
from weir.stores.config import ConfigKey, declared_keys

REPO = Path(__file__).resolve().parents[3]


def _fresh(code: str) -> str:
    """Run ``code`` in a fresh interpreter (nothing imported by the tests); its stdout."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout


def test_committed_key_index_matches_the_declarations():
    generated = _fresh("""
        import sys
        from weir.engine.config.job import load_all_declarations
        from weir.engine.config.declarations import render_index
        load_all_declarations()
        sys.stdout.write(render_index())
    """)
    committed = (REPO / INDEX_PATH).read_text(encoding="utf-8")
    assert committed == generated, (
        f"{INDEX_PATH} is stale: regenerate it with `weir config docs` (from the repository "
        f"root) and commit it")


def test_every_declaration_names_the_module_that_declares_it():
    load_all_declarations()
    for decl in declared_keys():
        assert decl.module and sys.modules[decl.module], decl.name
        assert decl.module.startswith(("weir.stores", "weir.recovery", "weir.engine")), decl.name


def test_importing_an_indexed_module_declares_its_keys():
    out = _fresh("""
        from weir.engine.config._declared_keys import KEYS
        import importlib
        from weir.stores.config import find_declared
        missing = []
        for name, aliases, module in KEYS:
            importlib.import_module(module)
        for name, aliases, module in KEYS:
            if find_declared(name.replace("<", "x").replace(">", "x")) is None and "<" not in name:
                missing.append(name)
        print(len(KEYS), missing)
    """)
    count, missing = out.split(" ", 1)
    assert int(count) > 100 and missing.strip() == "[]"


def test_the_index_finds_exact_names_placeholders_aliases_and_stream_property_spellings():
    index = _Index([
        ("job.name", (), "m.job"),
        ("job.container.count", ("yarn.container.count",), "m.model"),
        ("stores.<store>.factory", (), "m.spec"),
        ("systems.<system>.streams.<stream>.samza.offset.default", (), "m.offsets"),
        ("serializers.registry.<name>.class", (), "m.serdes"),
    ])
    assert index.modules("job.name") == {"m.job"}
    assert index.modules("yarn.container.count") == {"m.model"}
    assert index.modules("stores.counts.factory") == {"m.spec"}
    assert index.modules("stores.counts.bogus") == set()
    assert index.modules("stores..factory") == set()  # a placeholder is a non-empty name
    # <stream> may hold dots; the same property in the other two spellings finds it too.
    assert index.modules("systems.kafka.streams.page.views.samza.offset.default") == {"m.offsets"}
    assert index.modules("streams.clicks.samza.offset.default") == {"m.offsets"}
    assert index.modules("systems.kafka.default.stream.samza.offset.default") == {"m.offsets"}
    assert index.modules("serializers.registry.json.class") == {"m.serdes"}


def test_modules_declaring_a_store_job_are_few_and_never_the_cli_spark_or_server():
    modules = modules_declaring({
        "job.name": "wc", "task.class": "a:B", "task.inputs": "filelog.words",
        "systems.filelog.factory": "filelog", "systems.filelog.root": "/log",
        "systems.filelog.default.stream.samza.offset.default": "oldest",
        "stores.counts.factory": "rocksdb", "stores.counts.changelog": "filelog.c",
        "stores.counts.key.serde": "string", "job.container.count": "1"})
    assert "weir.engine.jobmodel.model" in modules and "weir.stores.spec" in modules
    assert not [m for m in modules if m.startswith(("weir.engine.cli", "weir.engine.spark",
                                                    "weir.engine.coordinator.server"))]


def test_render_index_lists_every_key_with_its_aliases_and_module():
    keys = [ConfigKey("b.size", int, 1, "B.", "x", module="weir.b"),
            ConfigKey("a.flag", bool, False, "A.", "x", aliases=("a.old",), module="weir.a")]
    text = render_index(keys)
    assert "    ('a.flag', ('a.old',), 'weir.a'),\n    ('b.size', (), 'weir.b'),\n)" in text
    with pytest.raises(ValueError, match="no declaring module"):
        render_index([ConfigKey("c", int, 1, "C.", "x")])


def test_checking_a_config_imports_only_the_modules_declaring_its_keys(tmp_path):
    path = tmp_path / "job.properties"
    path.write_text("job.name=wc\ntask.class=a:B\ntask.inputs=filelog.words\n"
                    "stores.counts.factory=rocksdb\nstores.counts.key.serde=string\n"
                    "stores.counts.msg.serde=int64\n")
    out = _fresh(f"""
        import sys
        from weir.engine.config.job import load_config, validate_config
        print(validate_config(load_config({str(path)!r})),
              sorted(m for m in sys.modules if m.startswith(("weir.engine.spark", "pyspark",
                     "weir.engine.cli", "uvicorn", "weir.engine.app"))))
    """)
    assert out.strip() == "[] []"


def test_a_typo_is_checked_against_every_declaration_and_gets_the_closest_key(tmp_path):
    path = tmp_path / "job.properties"
    # spark.weir.* keys are declared by the Spark runner's settings, which a check of this
    # config would not import: the warning makes the check load every declaration.
    path.write_text("job.name=wc\ntask.inputs=filelog.words\nspark.weir.state.providr=x\n")
    out = _fresh(f"""
        from weir.engine.config.job import load_config, validate_config
        for w in validate_config(load_config({str(path)!r})):
            print(w.key, w.suggestion)
    """)
    assert out.split() == ["spark.weir.state.providr", "spark.weir.state.provider"]


def test_a_bad_value_of_a_key_the_index_misses_is_still_refused():
    # A stale index (a key declared after the last `weir config docs`) finds no module for
    # the key: it reads as unknown, so every declaration is loaded and the value is parsed.
    out = _fresh("""
        from weir.engine.config import declarations
        declarations._INDEX = declarations._Index([])
        from weir.engine.config.job import validate_config
        from weir.stores.config import Config
        from weir.stores.errors import ConfigError
        try:
            validate_config(Config({"job.name": "wc",
                                    "spark.weir.max.records.per.batch": "many"}))
        except ConfigError as exc:
            print(type(exc).__name__, exc.key)
    """)
    assert out.split() == ["ConfigError", "spark.weir.max.records.per.batch"]


def test_checking_a_config_works_without_the_spark_extra(tmp_path):
    # A fresh process where pyspark cannot be imported (as without `pip install weir[spark]`):
    # loading every declaration for a check skips the Spark modules; so do the docs, as long
    # as the skipped modules declare no key (the key index says), and they refuse otherwise.
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent("""
        import sys
        sys.modules["pyspark"] = None  # `import pyspark` raises ModuleNotFoundError
        from weir.engine.config import _declared_keys
        from weir.engine.config.job import load_all_declarations, load_every_declaration
        from weir.engine.errors import EngineError
        modules = load_all_declarations()
        assert "weir.engine.container.runner" in modules
        assert "weir.engine.spark.logsource" not in modules
        assert "weir.engine.spark.settings" in load_every_declaration()
        load_every_declaration.cache_clear()
        _declared_keys.KEYS += (("spark.weir.made.up", (), "weir.engine.spark.logsource"),)
        try:
            load_every_declaration()
        except EngineError as exc:
            assert "weir.engine.spark.logsource" in str(exc) and "weir[spark]" in str(exc), exc
        else:
            raise AssertionError("the docs must not skip a module that declares keys")
        print("ok")
        """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "ok", out.stderr
