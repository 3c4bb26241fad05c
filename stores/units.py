"""Sizes for people: one format for every progress line, summary and table.

Example::

    >>> human_bytes(999), human_bytes(1536), human_bytes(5 * 1024 ** 3)
    ('999 B', '1.5 KiB', '5.0 GiB')
"""

from __future__ import annotations

__all__ = ["human_bytes"]


def human_bytes(n: float) -> str:
    """``n`` bytes in binary units with thousands separators: ``999 B``, ``1.5 KiB``,
    ``12.3 MiB``, ... ``TiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{int(n):,} B" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
