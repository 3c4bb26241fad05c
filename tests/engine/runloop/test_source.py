"""The envelope source seam: the loop refuses an object that does not declare it, and a source
that offers only ``choose`` runs on the base's defaults (no runs, never exhausted, nothing to
release, no metrics)."""

from __future__ import annotations

import pytest

from weir.engine.runloop.loop import RunLoop
from weir.engine.runloop.source import NO_METRICS, EnvelopeSource

from tests.engine.runloop._helpers import A, Recording, eos, instance, msgs, run


class OnlyChoose(EnvelopeSource):
    def __init__(self, *items):
        self.items = list(items)

    def choose(self, timeout):
        return self.items.pop(0) if self.items else None


class Undeclared:
    def choose(self, timeout):
        return None


def test_the_loop_refuses_a_source_that_does_not_derive_from_envelope_source():
    with pytest.raises(TypeError, match=r"run loop 'c7'.*EnvelopeSource.*got Undeclared"):
        RunLoop([instance(Recording(), [A])], Undeclared(), name="c7")


def test_a_source_with_only_choose_runs_to_end_of_stream_on_the_defaults():
    source = OnlyChoose(*msgs(A, 0, 1, 2), eos(A, 3))
    assert (source.choose_run(64), source.exhausted(), source.metrics()) == ((), False, NO_METRICS)
    task = Recording()
    summary = run([instance(task, [A])], source)
    assert summary.processed == {"Partition 0": 3}


def test_a_source_without_metrics_adds_no_consumers_section_to_the_snapshot():
    loop = RunLoop([instance(Recording(), [A])], OnlyChoose())
    assert "consumers" not in loop.metrics_snapshot()
