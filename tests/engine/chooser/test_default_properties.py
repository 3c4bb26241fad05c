"""Property: for any interleaving of arrivals the DefaultChooser respects priority and
bootstrap, and returns every envelope exactly once in per-SSP offset order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from weir.engine.chooser import chooser_from_config
from weir.engine.model import NO_TIMESTAMP, IncomingMessageEnvelope, SystemStreamPartition
from weir.engine.systems.api import PartitionMetadata

SYSTEM = "mem"


@st.composite
def scenarios(draw):
    n_streams = draw(st.integers(2, 4))
    streams = []
    for i in range(n_streams):
        name = f"s{i}"
        partitions = []
        for p in range(draw(st.integers(1, 3))):
            records = draw(st.integers(0, 6))
            newest = draw(st.integers(-1, records - 1)) if records else -1   # head at start
            start = draw(st.integers(0, records))
            stamps = draw(st.lists(st.one_of(st.just(NO_TIMESTAMP), st.integers(0, 20)),
                                   min_size=records, max_size=records))
            partitions.append(dict(records=records, newest=newest, start=start, stamps=stamps,
                                   ended=draw(st.booleans())))
        streams.append(dict(name=name, partitions=partitions,
                            bootstrap=draw(st.booleans()),
                            priority=draw(st.one_of(st.none(), st.integers(-1, 3)))))
    config = {"task.inputs": ",".join(f"{SYSTEM}.{s['name']}" for s in streams),
              "task.chooser.batch.size": str(draw(st.integers(0, 4))),
              "task.chooser.tiebreak": draw(st.sampled_from(["roundrobin", "time"]))}
    for s in streams:
        if s["bootstrap"]:
            config[f"systems.{SYSTEM}.streams.{s['name']}.samza.bootstrap"] = "true"
        if s["priority"] is not None:
            config[f"task.chooser.priorities.{SYSTEM}.{s['name']}"] = str(s["priority"])
    ssps = {}
    for s in streams:
        for p, part in enumerate(s["partitions"]):
            ssps[SystemStreamPartition(SYSTEM, s["name"], p)] = dict(part, bootstrap=s["bootstrap"])
    actions = draw(st.lists(st.integers(0, len(ssps)), max_size=120))
    return config, ssps, actions


class Harness:
    def __init__(self, config, ssps):
        self.ssps = ssps
        heads = {ssp: PartitionMetadata(0, part["newest"], part["newest"] + 1)
                 for ssp, part in ssps.items() if part["bootstrap"]}
        self.chooser = chooser_from_config(config, bootstrap_heads=heads)
        self.priority = self.chooser.priorities
        for ssp, part in ssps.items():
            self.chooser.register(ssp, part["start"])
        self.chooser.start()
        self.next_delivery = {ssp: part["start"] for ssp, part in ssps.items()}
        self.next_expected = dict(self.next_delivery)
        self.held: dict[SystemStreamPartition, IncomingMessageEnvelope] = {}
        self.returned = 0

    def _last_offset(self, ssp):
        part = self.ssps[ssp]
        return part["records"] if part["ended"] else part["records"] - 1   # EOS at `records`

    def deliverable(self, ssp):
        return ssp not in self.held and self.next_delivery[ssp] <= self._last_offset(ssp)

    def deliver(self, ssp):
        part, offset = self.ssps[ssp], self.next_delivery[ssp]
        if offset == part["records"]:
            e = IncomingMessageEnvelope.end_of_stream(ssp, offset)
        else:
            e = IncomingMessageEnvelope(ssp, offset, None, b"", part["stamps"][offset])
        self.chooser.update(e)
        self.held[ssp] = e
        self.next_delivery[ssp] += 1

    def bootstrap_caught_up(self):
        for ssp, part in self.ssps.items():
            if part["bootstrap"] and self.next_expected[ssp] <= part["newest"]:
                # Not every record present at start has been returned yet.
                if not self._ended_early(ssp):
                    return False
        return True

    def _ended_early(self, ssp):
        # An end-of-stream returned for the SSP also counts as caught up.
        part = self.ssps[ssp]
        return part["ended"] and self.next_expected[ssp] > part["records"]

    def choose(self):
        e = self.chooser.choose()
        if e is None:
            return None
        ssp = e.ssp
        assert self.held.get(ssp) is e, f"{ssp} offset {e.offset} returned but not held"
        top = max(self.priority.get(h.ssp.system_stream, 0) for h in self.held.values())
        assert self.priority.get(ssp.system_stream, 0) == top, (
            f"returned {ssp} (priority {self.priority.get(ssp.system_stream)}) while priority "
            f"{top} was held")
        if not self.ssps[ssp]["bootstrap"]:
            assert self.bootstrap_caught_up(), f"returned {ssp} before bootstrap caught up"
        assert e.offset == self.next_expected[ssp]
        self.next_expected[ssp] += 1
        del self.held[ssp]
        self.returned += 1
        return e


@given(scenarios())
def test_default_chooser_respects_priority_bootstrap_and_per_ssp_order(scenario):
    config, ssps, actions = scenario
    h = Harness(config, ssps)
    order = list(ssps)
    for a in actions:
        if a == len(order):
            h.choose()
        elif h.deliverable(order[a]):
            h.deliver(order[a])
    # Drain: keep every SSP supplied; the chooser must never stall while envelopes remain.
    while True:
        for ssp in order:
            if h.deliverable(ssp):
                h.deliver(ssp)
        if h.choose() is None:
            assert not h.held, f"chooser stalled holding {sorted(map(str, h.held))}"
            break
    expected = sum(h._last_offset(s) - p["start"] + 1 for s, p in ssps.items()
                   if h._last_offset(s) >= p["start"])
    assert h.returned == expected
