"""The runnable example at the top of docs/STORES.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

STORES_MD = Path(__file__).resolve().parents[2] / "docs" / "STORES.md"


def test_the_example_in_stores_md_runs():
    text = STORES_MD.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "docs/STORES.md lost its python example"
    exec(compile(blocks[0], str(STORES_MD), "exec"), {"__name__": "stores_md_example"})
