"""Prometheus text exposition format (version 0.0.4) for the coordinator's ``/metrics``.

Example::

    >>> text = render([Family("weir_demo_total", "counter", "Demo.", [({"path": "/"}, 3)])])
    >>> print(text, end="")
    # HELP weir_demo_total Demo.
    # TYPE weir_demo_total counter
    weir_demo_total{path="/"} 3
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["CONTENT_TYPE", "Family", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Family:
    """One metric: name, type (``counter``/``gauge``/``summary``), help, samples. A sample
    is ``(labels, value)``, or ``(labels, value, suffix)`` for ``_sum``/``_count``."""

    name: str
    type: str
    help: str
    samples: list[tuple] = field(default_factory=list)


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _value(v: float) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape_label(str(v))}"' for k, v in labels.items()) + "}"


def render(families: Iterable[Family]) -> str:
    """The exposition text of ``families`` (each HELP and TYPE once, then its samples)."""
    lines: list[str] = []
    for fam in families:
        lines.append(f"# HELP {fam.name} {_escape_help(fam.help)}")
        lines.append(f"# TYPE {fam.name} {fam.type}")
        for sample in fam.samples:
            labels, value = sample[0], sample[1]
            suffix = sample[2] if len(sample) > 2 else ""
            lines.append(f"{fam.name}{suffix}{_labels(labels)} {_value(value)}")
    return "\n".join(lines) + "\n"
