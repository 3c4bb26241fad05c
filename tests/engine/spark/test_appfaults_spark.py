"""The pageviews application on Spark with its driver killed: ``weir run app.properties
--runner spark`` in a real child process, SIGKILLed (driver, JVM and Python workers) in the
middle of a batch -- inside stage 1, after its run loop wrote the batch's window state, before
anything of the batch was published -- and, in the next run, between the last stage's
publish of a batch and Spark's commit of it; a third run goes to the end. The panes written
equal the embedded runner's on the same input, each exactly once: nothing lost, nothing
doubled.

Each kill is a handshake: the run starts with ``WEIR_SPARK_HOLD`` naming the fault point
(weir.engine.spark.faultpoint); the held task writes a marker file and waits; the test kills
the process group when the marker appears.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests._examples import load_example
from tests.engine.spark import _weirrun

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(3000)]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pageviews"
VIEWS = 1500
PER_BATCH = 400     # records per micro-batch: four batches of input, so kills land mid-run
STAGE_1 = "pageviews-1-stage-1"


@pytest.fixture
def example():
    return load_example("pageviews")


def _embedded_panes(example, base: Path) -> dict[str, Counter]:
    from weir.engine.app.runner import run_application
    from weir.engine.container.runner import ExitCode

    config = example.app_config(base / "embedded")
    example.generate(config, VIEWS)
    assert run_application(config).exit_code is ExitCode.OK
    return _weirrun.pageviews_panes(example, config)


def _published(base: Path, operator: str, batch: int) -> list[bool]:
    """Per task of the stage: whether it published ``batch``'s version."""
    from weir.engine.spark.durable import OperatorCheckpoint
    from weir.engine.spark.statefile import VersionKind

    files = OperatorCheckpoint(base / "spark" / "checkpoints" / "spark", operator)
    return [files.partition(p).exists(batch, VersionKind.CHANGELOG) for p in range(4)]


def _committed(base: Path) -> set[int]:
    """The batch ids in Spark's commit log of the query."""
    commits = base / "spark" / "checkpoints" / "spark" / "commits"
    return {int(p.name) for p in commits.iterdir() if p.name.isdigit()}


def test_pageviews_killed_mid_batch_and_between_publish_and_commit_writes_every_pane_once(
        example, tmp_path):
    want = _embedded_panes(example, tmp_path)
    overrides = _weirrun.spark_overrides(tmp_path,
                                         f"spark.weir.max.records.per.batch={PER_BATCH}")
    config = example.app_config(tmp_path / "spark", overrides)
    example.generate(config, VIEWS)
    log = tmp_path / "driver.log"

    mid = tmp_path / "held-before-publish"
    driver = _weirrun.start(EXAMPLE, overrides, log, f"before-publish:{STAGE_1}:1:{mid}")
    _weirrun.kill_at(driver, mid)
    assert not all(_published(tmp_path, STAGE_1, 1))   # the held task published nothing
    assert 1 not in _committed(tmp_path)

    after = tmp_path / "held-after-publish"
    driver = _weirrun.start(EXAMPLE, overrides, log, f"after-publish:{STAGE_1}:2:{after}")
    _weirrun.kill_at(driver, after)
    assert any(_published(tmp_path, STAGE_1, 2))       # published ...
    assert 2 not in _committed(tmp_path)                # ... and never committed by Spark

    done = _weirrun.run_to_end(EXAMPLE, overrides)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert "ended (end-of-stream)" in done.stdout
    got = _weirrun.pageviews_panes(example, config)
    assert got == want
    assert all(n == 1 for panes in got.values() for n in panes.values())   # none doubled
