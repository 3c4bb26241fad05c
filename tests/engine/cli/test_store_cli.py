"""``weir store repair``: the deprecated alias of ``weir state repair`` says so and does the
same (the command itself: tests/engine/cli/state/test_repair.py)."""

from __future__ import annotations

import pytest

from weir.engine.cli import main
from weir.engine.cli.store import DEPRECATION
from weir.recovery.damage import repair_command

from tests.engine.cli.state.test_repair import job  # noqa: F401 - the fixture


def test_the_alias_says_it_is_deprecated_and_repairs_as_state_repair_does(job, capsys):  # noqa: F811
    code = main(["store", "repair", job, "--task", "Partition 0", "--store", "counts",
                 "--keep-local"])
    out = capsys.readouterr()
    assert code == 0 and "needed no repair" in out.out + out.err
    assert DEPRECATION in out.err and "weir state repair" in DEPRECATION


def test_the_alias_help_names_the_command_to_use(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    line = next(line for line in capsys.readouterr().out.splitlines() if " store " in line)
    assert "deprecated" in line and "weir state repair" in line


def test_restore_errors_advise_state_repair():
    command = repair_command("Partition 0", "counts", "keep-local")
    assert command.startswith("weir state repair ")
