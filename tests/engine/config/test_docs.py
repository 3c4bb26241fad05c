"""docs/CONFIG.md is generated from the declarations and must match the code."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from weir.engine.cli import main
from weir.engine.config.job import config_docs_markdown, load_all_declarations
from weir.engine.errors import EngineError
from weir.engine.config.docs import import_all_modules, render_markdown
from weir.stores.config import ConfigKey, declared_keys

REPO = Path(__file__).resolve().parents[3]
CONFIG_MD = REPO / "docs" / "CONFIG.md"


def test_committed_config_md_matches_the_declarations():
    # A fresh interpreter, so keys declared by tests in this process cannot leak in.
    generated = subprocess.run(
        [sys.executable, "-c", "import sys; from weir.engine.config.job import config_docs_markdown; "
                               "sys.stdout.write(config_docs_markdown())"],
        cwd=REPO, capture_output=True, text=True, check=True).stdout
    committed = CONFIG_MD.read_text(encoding="utf-8") if CONFIG_MD.exists() else ""
    assert committed == generated, (
        "docs/CONFIG.md is stale: regenerate it with `weir config docs` (from the repository "
        "root) and commit it")


def test_every_module_of_the_three_packages_is_imported_except_main():
    modules = load_all_declarations()
    assert {"weir.stores.config", "weir.engine.config.job", "weir.engine.jobmodel.model", "weir.engine.cli.config",
            "weir.recovery.errors"} <= set(modules)
    assert not any(m.endswith("__main__") for m in modules)


def test_the_reference_lists_every_declared_key_once():
    text = config_docs_markdown()
    for decl in declared_keys():
        assert text.count(f"| `{decl.name.replace('|', chr(92) + '|')}` |") == 1, decl.name


def test_keys_are_grouped_by_component_in_tables_with_type_default_and_description():
    keys = [
        ConfigKey("b.size", int, 10, "Size | of b.", "zeta"),
        ConfigKey("a.flag", bool, False, "A flag.", "alpha", aliases=("a.old",)),
        ConfigKey("a.mode", str, "x", "Mode.", "alpha", choices=("x", "y")),
        ConfigKey("a.list", list, [], "Things.", "alpha"),
        ConfigKey("a.none", str, None, "Unset.", "alpha"),
    ]
    text = render_markdown(keys)
    assert "5 keys in 2 components" in text
    assert text.index("## alpha") < text.index("## zeta")
    assert "| `a.flag` | boolean | `false` | A flag. Also read as: `a.old`. |" in text
    assert "| `a.mode` | string | `x` | Mode. One of: `x`, `y`. |" in text
    assert "| `a.list` | list | (empty) | Things. |" in text
    assert "| `a.none` | string | (none) | Unset. |" in text
    assert "| `b.size` | integer | `10` | Size \\| of b. |" in text
    alpha = text[text.index("## alpha"):text.index("## zeta")]
    assert alpha.index("a.flag") < alpha.index("a.list") < alpha.index("a.mode") < alpha.index("a.none")


def test_generation_is_deterministic():
    assert config_docs_markdown() == config_docs_markdown()


def test_a_module_that_fails_to_import_stops_generation_naming_it(tmp_path, monkeypatch):
    pkg = tmp_path / "brokenpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "good.py").write_text("X = 1\n")
    (pkg / "bad.py").write_text(textwrap.dedent("""
        raise RuntimeError("half-written module")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(EngineError, match=r"brokenpkg.bad.*RuntimeError: half-written module"):
        import_all_modules(("brokenpkg",))
    for name in ("brokenpkg", "brokenpkg.good", "brokenpkg.bad"):
        sys.modules.pop(name, None)


def test_cli_docs_writes_the_file_then_check_passes(tmp_path, capsys):
    out = tmp_path / "docs" / "CONFIG.md"
    assert main(["config", "docs", "--output", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == config_docs_markdown()
    assert main(["config", "docs", "--output", str(out), "--check"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_cli_docs_check_on_a_stale_file_exits_1_with_a_diff_and_the_command(tmp_path, capsys):
    out = tmp_path / "CONFIG.md"
    out.write_text("# old\n", encoding="utf-8")
    assert main(["config", "docs", "--output", str(out), "--check"]) == 1
    err = capsys.readouterr().err
    assert "-# old" in err and "+# Weir configuration reference" in err
    assert f"weir config docs --output {out}" in err
    assert out.read_text(encoding="utf-8") == "# old\n"


def test_cli_docs_outside_a_checkout_prints_to_stdout_and_writes_nothing(tmp_path, capsys,
                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["config", "docs"]) == 0
    assert capsys.readouterr().out == config_docs_markdown()
    assert list(tmp_path.iterdir()) == []


def test_cli_docs_check_outside_a_checkout_is_an_error_that_asks_for_output(tmp_path, capsys,
                                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["config", "docs", "--check"]) == 2
    err = capsys.readouterr().err
    assert "not the root of a Weir checkout" in err and "--output FILE" in err
    assert list(tmp_path.iterdir()) == []


def test_cli_docs_check_of_a_missing_file_says_how_to_generate_it(tmp_path, capsys):
    missing = tmp_path / "CONFIG.md"
    assert main(["config", "docs", "--output", str(missing), "--check"]) == 2
    assert f"weir config docs --output {missing}" in capsys.readouterr().err
    assert not missing.exists()


def test_cli_docs_output_dash_is_stdout(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert main(["config", "docs", "--output", "-"]) == 0
    assert capsys.readouterr().out == config_docs_markdown()


def test_cli_docs_defaults_to_docs_config_md_at_the_root_of_a_checkout(tmp_path, capsys,
                                                                       monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "weir"\n')
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["config", "docs"]) == 0
    assert (tmp_path / "docs" / "CONFIG.md").read_text(encoding="utf-8") == config_docs_markdown()
    assert main(["config", "docs", "--check"]) == 0
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text('[project]\nname = "not-weir"\n')
    (other / "docs").mkdir()
    monkeypatch.chdir(other)
    assert main(["config", "docs"]) == 0
    assert not (other / "docs" / "CONFIG.md").exists()
