"""The run loop's routing table (engine/runloop/routing.py): which tasks an envelope goes to.

Covers: an SSP one task reads goes to that task, a shared one to each of its readers in task
order from each reader's own starting offset (a non-message envelope to every reader);
releasing a shared SSP leaves it to the other reader and keeps the source polling it; once no
task reads an SSP the source is told once and its envelopes are skipped quietly; envelopes of
an SSP no task ever read are counted and warned about once per SSP.
"""

from __future__ import annotations

import logging

from weir.engine.metrics import Counter
from weir.engine.runloop.routing import SspRoutes
from weir.engine.runloop.source import EnvelopeSource
from weir.engine.runloop.worker import Worker

from tests.engine.runloop._helpers import A, B, SHARED, Recording, eos, instance, msgs


class ReleasingSource(EnvelopeSource):
    """A source that records the SSPs the loop tells it no task reads any more."""

    def __init__(self):
        self.released: list[list] = []

    def choose(self, timeout):
        return None

    def release(self, ssps):
        self.released.append(list(ssps))


def workers(*instances):
    return [Worker(inst, lambda: None) for inst in instances]


def two_tasks_sharing(starting_b: int = 0):
    wa, wb = workers(instance(Recording(), [A, SHARED], "Partition 0"),
                     instance(Recording(), [B, SHARED], "Partition 1",
                              starting_offsets={SHARED: starting_b}))
    return wa, wb


def test_an_ssp_one_task_reads_goes_to_it_and_a_shared_one_to_each_reader_in_task_order():
    wa, wb = two_tasks_sharing()
    routes = SspRoutes([wa, wb], ReleasingSource(), Counter("skipped"), "c")

    assert routes.owners(msgs(A, 0)[0]) == (wa,)
    assert routes.owners(msgs(B, 0)[0]) == (wb,)
    assert list(routes.owners(msgs(SHARED, 0)[0])) == [wa, wb]
    assert routes.single == {A: wa, B: wb} and routes.shared == {SHARED: (wa, wb)}


def test_a_shared_message_skips_a_reader_before_its_starting_offset_but_not_end_of_stream():
    wa, wb = two_tasks_sharing(starting_b=2)
    routes = SspRoutes([wa, wb], ReleasingSource(), Counter("skipped"), "c")

    assert list(routes.owners(msgs(SHARED, 1)[0])) == [wa]
    assert wb.inst.metrics.skipped.count == 1
    assert list(routes.owners(msgs(SHARED, 2)[0])) == [wa, wb]
    assert list(routes.owners(eos(SHARED, 0))) == [wa, wb]


def test_releasing_a_shared_ssp_leaves_it_to_the_other_reader_and_the_source_keeps_it():
    wa, wb = two_tasks_sharing()
    source = ReleasingSource()
    routes = SspRoutes([wa, wb], source, Counter("skipped"), "c")

    routes.release(wa, [SHARED])

    assert routes.owners(msgs(SHARED, 0)[0]) == (wb,)
    assert routes.shared == {} and routes.single[SHARED] is wb
    assert source.released == []


def test_once_no_task_reads_an_ssp_the_source_is_told_once_and_its_envelopes_are_skipped_quietly(
        caplog):
    wa, wb = two_tasks_sharing()
    source = ReleasingSource()
    skipped = Counter("skipped")
    routes = SspRoutes([wa, wb], source, skipped, "c")

    routes.release(wa, [A, SHARED])
    routes.release(wb, [SHARED])
    with caplog.at_level(logging.WARNING, logger="weir.runloop"):
        owners = [routes.owners(env) for env in msgs(A, 5, 6) + msgs(SHARED, 5)]

    assert source.released == [[A], [SHARED]]
    assert owners == [(), (), ()] and skipped.count == 3
    assert "no task consumes" not in caplog.text


def test_releasing_an_ssp_the_task_does_not_read_changes_nothing():
    wa, wb = two_tasks_sharing()
    source = ReleasingSource()
    routes = SspRoutes([wa, wb], source, Counter("skipped"), "c")

    routes.release(wa, [B])

    assert routes.owners(msgs(B, 0)[0]) == (wb,) and source.released == []


def test_envelopes_of_an_ssp_no_task_reads_are_counted_and_warned_about_once_per_ssp(caplog):
    wa, _ = two_tasks_sharing()
    skipped = Counter("skipped")
    routes = SspRoutes([wa], object(), skipped, "the-container")  # B: nobody reads it
    with caplog.at_level(logging.WARNING, logger="weir.runloop"):
        owners = [routes.owners(env) for env in msgs(B, 0, 1, 2)]

    assert owners == [(), (), ()] and skipped.count == 3
    warnings = [r.getMessage() for r in caplog.records if "no task consumes" in r.getMessage()]
    assert len(warnings) == 1 and "the-container" in warnings[0] and str(B) in warnings[0]
