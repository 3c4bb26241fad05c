"""``--reset-state``: start a job's state over, so that new immutable settings can be accepted.

What the immutable-settings guard protects is the match between tasks, their checkpoints,
their changelog partitions and their local stores. Resetting moves all of it aside, for the
stores of the previous and of the new config, through the one reset module every reset uses
(:mod:`weir.engine.container.state_reset`, also behind ``weir checkpoint reset``):

1. the checkpoints (``task.checkpoint.path`` files or the checkpoint stream): the inputs are
   read again from ``samza.offset.default``;
2. each store's changelog stream;
3. each store's local directories (``<base>/<store>``, logged and non-logged bases);
4. with exactly-once, the producer state of the job's tasks (after completing the
   transactions a killed run left unfinished);

each renamed to ``<name>.reset-<UTC time>``, never deleted; then

4. the coordinator stream's assignments (changelog partitions, task containers, input
   partitions, locality) are tombstoned: the new job model assigns afresh.

Nothing moves while another process holds it: a store directory or a changelog partition
locked by a running process stops the reset with that process named, before anything moved.
The coordinator stream's assignments are written last, so a reset that fails halfway leaves
the guard refusing the change until a reset completes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from weir.stores.config import Config
from weir.stores.errors import StoreLockedError

from weir.recovery.checkpoint import aside_suffix
from weir.recovery.errors import RecoveryError

from weir.engine.container.state_reset import ResetMove, plan_state_reset
from weir.engine.coordinator.errors import CoordinatorError
from weir.engine.coordinator.state import CoordinatorState, assignment_tombstones
from weir.engine.coordinator.stream import CoordinatorStreamStore
from weir.engine.errors import SystemError_
from weir.engine.systems.registry import SystemRegistry

__all__ = ["ResetReport", "reset_job_state"]

log = logging.getLogger("weir.coordinator")

RESET_SOURCE = "reset-state"


@dataclass
class ResetReport:
    """What a reset moved aside (and where to), and the assignments it tombstoned."""

    moves: list[ResetMove] = field(default_factory=list)
    assignments: int = 0

    def of_kind(self, kind: str) -> list[ResetMove]:
        return [m for m in self.moves if m.kind == kind]

    def summary(self) -> str:
        where = "; ".join(f"{m.source} -> {m.target}" for m in self.moves
                          if m.kind != "transaction") or "nothing to move"
        completed = len(self.of_kind("transaction"))
        finished = f"completed {completed} unfinished transaction(s), " if completed else ""
        return (f"reset the job's state: {finished}moved aside "
                f"{len(self.of_kind('checkpoints'))} checkpoint location(s), "
                f"{len(self.of_kind('store'))} store director(y/ies), "
                f"{len(self.of_kind('changelog'))} changelog stream(s), "
                f"{len(self.of_kind('producers'))} producer state location(s) (never deleted: "
                f"{where}); {self.assignments} assignment(s) tombstoned in the coordinator "
                f"stream")


def reset_job_state(previous: CoordinatorState, config: Config, store: CoordinatorStreamStore,
                    registry: SystemRegistry) -> ResetReport:
    """Move the job's state aside (see the module docstring) and return what was moved."""
    configs = [c for c in (previous.config, config) if len(c)]
    try:
        plan = plan_state_reset(configs, registry, suffix=aside_suffix("reset"))
        moves = plan.run()
    except (StoreLockedError, SystemError_, RecoveryError) as exc:
        raise CoordinatorError(f"cannot reset the job's state: {exc}") from None
    report = ResetReport(moves)
    tombstones = assignment_tombstones(previous, source=RESET_SOURCE)
    store.write(tombstones)
    report.assignments = len(tombstones)
    log.warning("%s", report.summary())
    return report
