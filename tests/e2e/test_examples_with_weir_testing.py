"""The README's examples under weir.testing: their own job files, run in this process on the
memory system, with a crash where it hurts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from weir.testing import TestRunner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_word_count_counts_every_word_exactly_once_across_a_crash():
    words = [{"word": w} for w in "the cat sat on the mat and the dog sat".split()]
    with TestRunner(config=EXAMPLES / "word_count" / "job.properties", commit_every=3) as runner:
        runner.input("filelog.words", words)  # one partition: offsets 0..9
        runner.output("filelog.word-counts")
        runner.crash_at("filelog.words", offset=7)  # "the" again, after the commit at 6

        assert runner.run().crashed
        result = runner.run()

        assert result.store("counts") == dict(Counter(m["word"] for m in words))
        last = {}
        for count in result.output("filelog.word-counts"):  # at least once: keep the latest
            last[count["word"]] = max(last.get(count["word"], 0), count["count"])
        assert last == dict(Counter(m["word"] for m in words))


def test_pageviews_counts_views_per_user_and_minute_and_sessions():
    import sys
    sys.path.insert(0, str(EXAMPLES / "pageviews"))
    from pageviews import PageViews

    views = [{"user": "Ann", "page": "/p/1", "ts": 1_000}, {"user": "ann", "page": "/p/2", "ts": 2_000},
             {"user": "bob", "page": "/p/2", "ts": 61_000, "robot": True},
             {"user": "bob", "page": "/p/3", "ts": 65_000}]
    with TestRunner(app=PageViews, config=EXAMPLES / "pageviews" / "app.properties") as runner:
        runner.input("filelog.pageviews", views, partitions=2)
        result = runner.run()

        per_minute = {(w["key"], w["start"]): w["value"]
                      for w in result.output("filelog.views-per-minute")}
        sessions = {(w["key"], w["start"]): w["value"] for w in result.output("filelog.sessions")}

    assert per_minute == {("ann", 0): 2, ("bob", 60_000): 1}
    assert sessions == {("ann", 1_000): 2, ("bob", 65_000): 1}
