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
