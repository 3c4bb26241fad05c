"""``weir drain`` of an application running on Spark: the pageviews application reads a stream
that has not ended (``weir run --runner spark``, a real child process); once Spark committed
its first batch, ``weir drain --wait`` asks it to drain: the source admits nothing more, the
batch in flight is committed through both stages, the driver stops the query, exits 0 and
moves the request aside as completed. The stream then ends and a second run continues from
the drained batch to the end: the panes equal the embedded runner's on the same input, each
once."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._examples import load_example
from tests.engine.spark import _weirrun

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pageviews"
VIEWS = 1500


@pytest.fixture
def example():
    return load_example("pageviews")


def _batches(checkpoint: Path, log: str) -> set[int]:
    directory = checkpoint / log
    return {int(p.name) for p in directory.iterdir() if p.name.isdigit()} \
        if directory.is_dir() else set()


def test_the_source_admits_nothing_while_a_drain_request_for_a_running_run_is_there(
        example, tmp_path):
    from weir.engine.control.drain import drain_path_of, write_drain_request
    from weir.engine.spark.apprunner import plan_app
    from weir.engine.spark.logsource import LogStreamReader

    config = example.app_config(tmp_path, ["spark.weir.max.records.per.batch=100"])
    example.generate(config, 300)
    from weir.engine.app.planner import plan_application

    plan_application(config).create_streams()
    plan = plan_app(config, config_dir=str(EXAMPLE), check=True).app.source.plan
    assert plan.drain_path == str(drain_path_of(config))
    reader = LogStreamReader(plan)
    start = reader.initialOffset()
    first = reader.latestOffset(start, None)
    assert first != start
    write_drain_request(Path(plan.drain_path))          # for any run: taken
    assert reader.latestOffset(first, None) == first    # nothing more admitted


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_weir_drain_stops_an_application_on_spark_after_its_batch_and_a_rerun_continues(
        example, tmp_path):
    from weir.engine.app.runner import run_application
    from weir.engine.container.runner import ExitCode
    from weir.engine.systems.registry import SystemRegistry

    embedded = example.app_config(tmp_path / "embedded")
    example.generate(embedded, VIEWS)
    assert run_application(embedded).exit_code is ExitCode.OK
    want = _weirrun.pageviews_panes(example, embedded)

    overrides = _weirrun.spark_overrides(tmp_path, "spark.weir.max.records.per.batch=300")
    config = example.app_config(tmp_path / "spark", overrides)
    example.write_views(config, example.make_views(VIEWS), end=False)   # not ended yet
    checkpoint = tmp_path / "spark" / "checkpoints" / "spark"
    driver = _weirrun.start(EXAMPLE, overrides, tmp_path / "driver.log")
    deadline = time.monotonic() + 900
    while not _batches(checkpoint, "commits"):          # the first batch is committed
        if driver.proc.poll() is not None and not driver.respawn_if_worker_failed():
            raise AssertionError(driver.output()[-4000:])
        assert time.monotonic() < deadline, driver.output()[-4000:]
        time.sleep(0.2)

    drain = subprocess.run(
        [sys.executable, "-m", "weir", "drain", str(EXAMPLE / "app.properties"),
         "--wait", "900", *[a for o in overrides for a in ("--set", o)]],
        capture_output=True, text=True, timeout=1000)
    assert drain.returncode == 0, drain.stdout + drain.stderr
    assert "drained" in drain.stdout
    assert driver.proc.wait(timeout=600) == 0, driver.output()[-4000:]
    assert "drained (request" in driver.output()
    assert _batches(checkpoint, "offsets") == _batches(checkpoint, "commits")   # none in flight
    drain_file = tmp_path / "spark" / "checkpoints" / "drain-request.json"
    assert not drain_file.exists()
    assert list(drain_file.parent.glob("drain-request.json.completed-*"))

    SystemRegistry(config).admin("filelog").end_stream("pageviews")
    done = _weirrun.run_to_end(EXAMPLE, overrides)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert "ended (end-of-stream)" in done.stdout
    got = _weirrun.pageviews_panes(example, config)
    assert got == want
    assert all(n == 1 for panes in got.values() for n in panes.values())
