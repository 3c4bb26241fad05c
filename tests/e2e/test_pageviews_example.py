"""The README's high-level example runs end to end and matches a direct computation, as one
job and as one job per stage."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._examples import load_example as load_examples_module

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]   # exactly-once commits: slow disks

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pageviews" / "run_example.py"


def load_example():
    return load_examples_module("pageviews")


@pytest.mark.parametrize("stages,containers", [(False, "1"), (False, "2"), (True, "auto")],
                         ids=["one-job", "one-job-two-containers", "job-per-stage"])
def test_the_pageviews_example_matches_a_direct_computation(tmp_path, capsys, stages,
                                                            containers):
    # Two containers: the tasks of both processes append to the same intermediate partitions.
    example = load_example()
    argv = (["--views", "3000", "--workdir", str(tmp_path),
             "--set", f"job.container.count={containers}"] + (["--stages"] if stages else []))
    assert example.main(argv) == 0
    out = capsys.readouterr().out
    assert "match a direct computation" in out and "MISMATCH" not in out
