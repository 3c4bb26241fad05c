"""hello-samza's Wikipedia jobs, ported (examples/wikipedia): their .properties run with the
runner, and the tasks behave as the Java originals under weir.testing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from weir.testing import TestRunner, advance

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "wikipedia"
if str(EXAMPLE) not in sys.path:
    sys.path.insert(0, str(EXAMPLE))

from wikipedia_parser import parse_line  # noqa: E402

# hello-samza's TestWikipediaTask sample
SAMPLE = {"channel": "#en.wikipedia", "time": 1540408899419, "source": "rc-pmtpa",
          "raw": "[[Fear Is the Key (song)]]  https://en.wikipedia.org/w/index.php?diff=865574761"
                 "&oldid=861177329 * Sam Sailor * (+46) Redirecting to [[Fear of the Dark (Iron "
                 "Maiden album)]] ([[User:Sam Sailor/Scripts/Sagittarius+|♐]])"}


def edit(title: str, diff: int, flags: str = "") -> dict:
    return {"channel": "#en.wikipedia", "time": 1, "source": "rc-pmtpa",
            "raw": f"[[{title}]] {flags} https://en.wikipedia.org/w/index.php?diff=1 * U * "
                   f"(+{diff}) s"}


def test_the_parser_job_parses_hello_samzas_test_sample_as_its_test_expects():
    with TestRunner(config=EXAMPLE / "wikipedia-parser.properties") as runner:
        runner.input("kafka.wikipedia-raw", [SAMPLE, {**SAMPLE, "raw": "not an edit"}])
        runner.output("kafka.wikipedia-edits")
        (parsed,) = runner.run().output("kafka.wikipedia-edits")

    assert parsed["title"] == "Fear Is the Key (song)"
    assert (parsed["user"], parsed["diff-bytes"], parsed["channel"]) == ("Sam Sailor", 46,
                                                                         "#en.wikipedia")
    assert parsed["flags"]["is-minor"] is False


def test_parse_line_reads_flags_and_negative_diffs_as_the_java_parser():
    parsed = parse_line("[[Talk:X]] MB https://w/x * Bot * (-120) tidy")
    assert parsed["diff-bytes"] == -120 and parsed["unparsed-flags"] == "MB"
    assert parsed["flags"]["is-talk"] and parsed["flags"]["is-bot-edit"]


def test_the_stats_job_counts_each_window_as_the_java_task_does():
    with TestRunner(config=EXAMPLE / "wikipedia-stats.properties") as runner:
        runner.input("kafka.wikipedia-edits", [
            *map(parse_line, [edit("A", 10, "M")["raw"], edit("B", 5)["raw"],
                              edit("A", 1, "M")["raw"]]),
            advance(10_000),
            parse_line(edit("C", 7, "N")["raw"]),
            advance(10_000)])
        runner.output("kafka.wikipedia-stats")
        result = runner.run()
        first, second = result.output("kafka.wikipedia-stats")

    # the Java task's flag counts start at 0 on a flag's first edit
    assert first == {"is-minor": 1, "edits": 3, "bytes-added": 16, "unique-titles": 2,
                     "edits-all-time": 3}
    assert second == {"is-new": 0, "edits": 1, "bytes-added": 7, "unique-titles": 1,
                      "edits-all-time": 4}
    assert result.store("wikipedia-stats") == {"count-edits-all-time": 4}
    assert result.metrics("Partition 0")["user"]["edit-counters"]["repeat-edits"] == {"count": 1}


def test_a_crash_of_the_stats_job_keeps_the_edits_of_all_time_exact():
    edits = [parse_line(edit(t, 1)["raw"]) for t in "ABCDEFGH"]
    with TestRunner(config=EXAMPLE / "wikipedia-stats.properties", commit_every=3) as runner:
        runner.input("kafka.wikipedia-edits", edits)
        runner.output("kafka.wikipedia-stats")
        runner.crash_at("kafka.wikipedia-edits", offset=5)
        assert runner.run().store("wikipedia-stats") == {"count-edits-all-time": 5}
        assert runner.run().store("wikipedia-stats") == {"count-edits-all-time": 8}


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_wikipedia_example_matches_a_direct_computation(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("wikipedia_run_example",
                                                  EXAMPLE / "run_example.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    assert example.main(["--edits", "2000", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "match a direct computation" in out and "MISMATCH" not in out
