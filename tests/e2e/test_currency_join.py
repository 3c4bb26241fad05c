"""The main example end to end: examples/currency_join on small data, through the embedded
runner, every output checked against a direct computation over the generated input."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("weir.engine.systems.filelog", reason="the file log system is not built yet")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "currency_join"
sys.path.insert(0, str(EXAMPLE))

from generate import CURRENCIES, generate  # noqa: E402
from run_example import check, job_config, main, read_outputs  # noqa: E402

from weir.engine.model import SystemStream  # noqa: E402
from weir.engine.container.runner import ExitCode, run_job  # noqa: E402
from weir.engine.container.status import StatusMode  # noqa: E402

from tests.e2e import _order_wrapper  # noqa: E402

TRANSACTIONS, REPLAY = 1500, 700


@pytest.fixture
def run(tmp_path):
    config = job_config(tmp_path, ["task.wrapper.class=tests.e2e._order_wrapper:RecordOrder",
                                   "task.window.ms=50",
                                   "job.container.count=1"])  # ORDER is this process's
    truth = generate(config, transactions=TRANSACTIONS, replay=REPLAY, seed=11)
    _order_wrapper.ORDER.clear()
    result = run_job(config, status=StatusMode.OFF)
    assert result.exit_code is ExitCode.OK, result.summary_lines()
    return config, truth, result


def test_every_amount_and_every_final_total_matches_the_input(run):
    config, truth, result = run
    amounts, totals = read_outputs(config)

    assert check(truth, amounts, totals) == []
    assert len(amounts) == TRANSACTIONS + REPLAY  # no crash: each exactly once
    assert {key: message["amount"] for key, message in amounts} == truth.amounts
    assert totals == truth.totals
    assert set(totals) == set(CURRENCIES)


def test_the_summary_counts_messages_in_and_out_per_stream(run):
    _, truth, result = run
    assert result.inputs == {SystemStream("filelog", s): n for s, n in truth.records.items()}
    assert result.outputs[SystemStream("filelog", "amounts")] == TRANSACTIONS + REPLAY
    assert result.outputs[SystemStream("filelog", "currency-totals")] >= len(CURRENCIES)
    assert any("filelog.transactions-replay" in line for line in result.summary_lines())


def test_no_transaction_is_processed_before_every_currency_code(run):
    order = _order_wrapper.ORDER
    streams = [stream for stream, _ in order]
    last_code = max(i for i, s in enumerate(streams) if s == "currency-codes")
    first_transaction = min(i for i, s in enumerate(streams) if s != "currency-codes")
    assert streams.count("currency-codes") == len(CURRENCIES)
    assert last_code < first_transaction


def test_run_example_generates_runs_and_checks_in_one_command(tmp_path, capsys):
    code = main(["--transactions", "400", "--replay", "100", "--workdir", str(tmp_path),
                 "--status", "off"])
    out = capsys.readouterr().out

    assert code == 0, out
    assert "job 'currency-join' ended (end-of-stream)" in out
    assert "checked: 500 amounts and" in out
