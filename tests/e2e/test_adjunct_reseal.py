"""A versioned adjunct dataset sealed twice (issue 23, point 1): the README's CDC enrichment
example run with ``weir run`` in a child process after an operator retried ``weir log produce
model --seal``. The repeated seal switches nothing: every enriched click is scored with the
model it was sealed with, and the job log says what happened (it used to switch to an empty
version 2: every click scored 0.0 with model_version null, without a word)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cdc_enrich"
LOG = "weir-data/cdc-enrich/log"


def weir(workdir: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(EXAMPLE)]))
    done = subprocess.run([sys.executable, "-m", "weir", *args], cwd=workdir, env=env,
                          input=stdin, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"weir {' '.join(args)}: {done.stdout}\n{done.stderr}"
    return done


def lines(rows) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def test_a_retried_seal_keeps_the_model_it_sealed(tmp_path):
    (tmp_path / "job.properties").write_text((EXAMPLE / "job.properties").read_text())
    for stream, partitions in (("products-cdc", 2), ("model", 1), ("clicks", 2),
                               ("enriched", 2)):
        weir(tmp_path, "log", "create", stream, "--partitions", str(partitions), "--root", LOG,
             *(["--bounded"] if stream != "enriched" else []))
    products = [{"sku": f"s{i}", "name": f"product {i}", "category": f"c{i % 3}"}
                for i in range(30)]
    weir(tmp_path, "log", "produce", "products-cdc", "--format", "json", "--key-field", "sku",
         "--root", LOG, "--end", stdin=lines(products))
    model = "".join(f'c{c}={{"weight": {1 + c}, "version": 1}}\n' for c in range(3))
    weir(tmp_path, "log", "produce", "model", "--format", "kv", "--seal", "--root", LOG,
         stdin=model)
    retried = weir(tmp_path, "log", "produce", "model", "--seal", "--root", LOG, "--end")
    assert "produced 0 record(s)" in retried.stdout and "sealed p0@" in retried.stdout
    clicks = [{"id": f"k{i}", "sku": f"s{i % 30}", "user": f"u{i % 7}"} for i in range(200)]
    weir(tmp_path, "log", "produce", "clicks", "--format", "json", "--key-field", "id",
         "--root", LOG, "--end", stdin=lines(clicks))

    run = weir(tmp_path, "run", "job.properties", "--status", "off")

    assert "taken for a repeated seal" in run.stderr and "version 1 stays served" in run.stderr
    tail = weir(tmp_path, "log", "tail", "enriched", "--root", LOG).stdout
    enriched = [json.loads(line.split(" value=", 1)[1]) for line in tail.splitlines()
                if " value=" in line]
    assert len(enriched) == 200
    assert {row["model_version"] for row in enriched} == {1}
    assert all(row["score"] > 0 for row in enriched)
