"""Fault points of a Weir task inside a Spark micro-batch, for crash tests of the real driver.

A process started with ``WEIR_SPARK_HOLD=<point>:<operator>:<batch>:<marker>`` (Spark's
Python workers inherit the driver's environment in local mode) holds the first task of state
operator ``<operator>`` that reaches ``<point>`` in micro-batch ``<batch>``: it writes the
file ``<marker>`` (atomically, with its pid) and waits there until the test kills the
driver's process group with SIGKILL (tests/engine/spark/test_appfaults_spark.py). Without the
variable nothing happens: one dictionary lookup per task and batch.

Points (:class:`FaultPoint`):

* ``before-publish``: the task's run loop processed the batch; its stores hold the batch's
  writes, staged, and nothing of the batch is published (the driver killed mid-batch, inside
  the stage, after state was written);
* ``after-publish``: the task published the batch's version (state and outputs); no row of
  it reached the next stage or the sink and Spark has not committed the batch (killed between
  the state publish and Spark's commit).

Example::

    >>> hold_at(FaultPoint.AFTER_PUBLISH, "pageviews-1-stage-1", 3)   # no WEIR_SPARK_HOLD: returns
"""

from __future__ import annotations

import os
import time
from enum import Enum

__all__ = ["FaultPoint", "HOLD_ENV", "hold_at"]

HOLD_ENV = "WEIR_SPARK_HOLD"
_HOLD_S = 600.0


class FaultPoint(Enum):
    """Where in a task's micro-batch :func:`hold_at` can hold (see the module docstring)."""

    BEFORE_PUBLISH = "before-publish"
    AFTER_PUBLISH = "after-publish"


def hold_at(point: FaultPoint, operator: str, batch: int) -> None:
    """Hold here when ``WEIR_SPARK_HOLD`` names this point, operator and batch (the first task
    to arrive holds; the marker file decides which)."""
    spec = os.environ.get(HOLD_ENV)
    if not spec:
        return
    want_point, want_operator, want_batch, marker = spec.split(":", 3)
    if (want_point, want_operator, int(want_batch)) != (point.value, operator, batch):
        return
    try:
        fd = os.open(marker + ".tmp", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return   # another task of the batch holds already
    os.write(fd, str(os.getpid()).encode())
    os.fsync(fd)
    os.close(fd)
    os.replace(marker + ".tmp", marker)
    deadline = time.monotonic() + _HOLD_S
    while time.monotonic() < deadline:   # the test kills this process group
        time.sleep(0.2)
    raise RuntimeError(f"{HOLD_ENV}: held at {point.value} of {operator} batch {batch} for "
                       f"{_HOLD_S:.0f} s and nobody killed the driver ({marker})")
