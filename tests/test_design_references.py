"""Product code and user docs cite ``docs/``, never the design documents users do not have
(the SAMZA-REFERENCE, PERF-FACTS, SPARK-NOTES and STYLE-ANCHORS notes, the "seed design",
``../shared/design/``)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_UNSHIPPED = re.compile(r"SAMZA-REFERENCE|PERF-FACTS|SPARK-NOTES|STYLE-ANCHORS|ENGINE-LAYOUT"
                        r"|seed design|shared/design", re.IGNORECASE)


def _shipped_files() -> list[Path]:
    files = [p for package in ("stores", "engine", "recovery", "weir")
             for p in sorted((REPO / package).rglob("*.py"))]
    return files + sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]


def test_product_code_and_docs_cite_no_unshipped_design_document():
    offenders = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
                 for path in _shipped_files()
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if _UNSHIPPED.search(line)]
    assert not offenders, ("cite docs/ instead (move what users need there):\n"
                           + "\n".join(offenders))


def test_the_check_sees_a_citation():
    assert _UNSHIPPED.search("as Samza does (SAMZA-REFERENCE 4.7)")
    assert _UNSHIPPED.search("see ../shared/design/SPARK-NOTES.md")
