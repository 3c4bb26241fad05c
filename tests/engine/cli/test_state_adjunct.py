"""``weir state list`` shows each adjunct store with the version it serves and the one it
builds; ``weir state show`` prints the served version's entries (real job, file log, RocksDB)."""

from __future__ import annotations

import json

from weir.engine.cli import main
from weir.engine.systems.registry import SystemRegistry

from tests.engine.adjunct import _support as S


def test_state_list_and_show_name_the_served_and_built_versions(tmp_path, capsys, monkeypatch):
    cfg = S.model_config(tmp_path)
    registry = SystemRegistry(cfg)
    S.create(registry, "products", "model", "clicks", "scored")
    S.produce(registry, "products", [("sku1", {"name": "pen"})], partition=0)
    S.model_version(registry, 1, rows=3)
    S.model_version(registry, 2, rows=2, seal=False)  # version 2 half built
    S.end(registry, "products", "model", "clicks")
    S.run(cfg)
    path = tmp_path / "job.properties"
    path.write_text("".join(f"{k}={cfg[k]}\n" for k in sorted(cfg)))
    monkeypatch.chdir(tmp_path)

    assert main(["state", "list", str(path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["stores"] == []  # both stores are adjunct stores: not a task's own
    rows = {r["store"]: r for r in listed["adjunct_stores"]}
    assert (rows["model"]["owner"], rows["model"]["serving_version"],
            rows["model"]["building_version"]) == ("broadcast-container-0", 1, 2)
    assert rows["model"]["offsets"] == {"0": 7}
    assert (rows["products"]["serving_version"], rows["products"]["building_version"]) == (0, None)

    assert main(["state", "list", str(path)]) == 0
    out = capsys.readouterr().out
    assert "adjunct stores" in out and "v1" in out and "v2" in out

    assert main(["state", "show", str(path), "--store", "model", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)["entries"]
    assert {e["task"] for e in entries} == {"broadcast-container-0 v1"}
    assert {e["key"]: e["value"] for e in entries}["w0"] == {"version": 1}
