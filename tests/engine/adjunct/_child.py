"""A container process for the SIGKILL tests: ``python -m tests.engine.adjunct._child KIND
TMP CONTAINER COUNT`` runs container CONTAINER of a job with ``job.container.count=COUNT``
until it is killed (its inputs never end)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.engine.adjunct import _support as S


def main(kind: str, tmp: str, container_id: str, count: str) -> None:
    path = Path(tmp)
    extra = {"job.container.count": count, "task.commit.ms": "50"}
    cfg = S.model_config(path, **extra) if kind == "model" else S.config(path, **extra)
    S.run(cfg, container_id)


if __name__ == "__main__":
    main(*sys.argv[1:5])
