"""The adjunct store example end to end: examples/cdc_enrich on small data (a product change
stream bootstrapped into a broadcast adjunct store and joined to clicks, a versioned model
replaced while the job runs), every enriched click checked against the final product table
and the model version it names."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cdc_enrich"


def _example():
    sys.path.insert(0, str(EXAMPLE))
    try:
        spec = importlib.util.spec_from_file_location("cdc_enrich_run_example",
                                                      EXAMPLE / "run_example.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(EXAMPLE))


def test_every_enriched_click_matches_the_product_table_and_its_model_version(tmp_path, capsys):
    example = _example()
    assert example.main(["--products", "3000", "--clicks", "2000",
                         "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "switched to it, version 1 dropped" in out
    assert "all 2,000 enriched clicks match" in out
