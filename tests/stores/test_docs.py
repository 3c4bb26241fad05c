"""The runnable example at the top of docs/STORES.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

from tests._doctests import temp_files_in

STORES_MD = Path(__file__).resolve().parents[2] / "docs" / "STORES.md"


def test_the_example_in_stores_md_runs(tmp_path):
    text = STORES_MD.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "docs/STORES.md lost its python example"
    with temp_files_in(tmp_path):  # the example's mkdtemp() directory goes to tmp_path
        exec(compile(blocks[0], str(STORES_MD), "exec"), {"__name__": "stores_md_example"})
