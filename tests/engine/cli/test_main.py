"""The ``weir`` entry point turns errors into one line and an exit code, never a traceback."""

from __future__ import annotations

from weir.engine.cli import main


def test_an_os_error_ends_with_one_line_naming_the_path_and_exit_code_1(tmp_path, capsys):
    (tmp_path / "a-file").write_text("x")
    code = main(["log", "create", "words", "--root", str(tmp_path / "a-file" / "log")])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("weir: error: NotADirectoryError: ")
    assert str(tmp_path / "a-file") in err
    assert "Traceback" not in err


def test_every_command_module_registers_the_command_named_after_it():
    from weir.engine.cli import _COMMAND_MODULES, build_parser
    for module in _COMMAND_MODULES:
        command = module.rpartition(".")[2]
        parser = build_parser(command)
        sub = next(a for a in parser._actions if a.dest == "command")
        assert list(sub.choices) == [command], module


def test_a_command_imports_only_its_own_module_and_no_command_builds_every_one():
    import subprocess
    import sys
    code = ("import sys\nfrom weir.engine.cli import build_parser\n"
            "build_parser(sys.argv[1] if len(sys.argv) > 1 else None)\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('weir.engine.cli.'))))")
    run = subprocess.run([sys.executable, "-c", code, "run"], capture_output=True, text=True,
                         check=True).stdout.split()
    every = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.split()
    assert run == ["weir.engine.cli.run"]
    assert {"weir.engine.cli.run", "weir.engine.cli.state", "weir.engine.cli.log"} <= set(every)


def test_an_unknown_command_is_refused_with_the_list_of_commands(capsys):
    import pytest
    with pytest.raises(SystemExit) as exit_info:
        main(["bogus"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'bogus'" in err and "'run'" in err and "'state'" in err
