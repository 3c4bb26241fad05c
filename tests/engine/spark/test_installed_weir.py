"""Spark's Python workers import the installed Weir whatever the working directory: run from a
checkout of Weir (whose root holds the ``weir/`` facade folder, without ``stores/`` and
``engine/`` inside), they used to import that folder and fail with ``No module named
'weir.stores'``.

Installed as a wheel installs it (``site-packages/weir/`` with ``stores``, ``recovery`` and
``engine`` inside; linked here instead of built, to keep the test cheap) into a separate
virtual environment without the editable install, whose dependencies come from this one; a
driver script in its own directory starts Spark in local mode from a directory holding a copy
of the facade, as ``weir run --runner spark`` from the repository root does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]

DRIVER = """\
from weir.engine.spark.session import spark_session

spark = spark_session({"spark.master": "local[1]", "spark.ui.enabled": "false"})

def where(_):
    import weir, weir.stores
    yield weir.__file__

print("WORKER", spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()[0])
spark.stop()
"""


def installed_weir(root: Path) -> Path:
    """A virtual environment with Weir installed the way a wheel installs it; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = Path(subprocess.run(
        [str(root / "bin" / "python"), "-c",
         "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    package = site / "weir"
    package.mkdir()
    for facade in (REPO / "weir").glob("*.py"):
        shutil.copy(facade, package / facade.name)
    for folder in ("stores", "recovery", "engine"):
        (package / folder).symlink_to(REPO / folder, target_is_directory=True)
    # Dependencies (pyspark, rocksdict ...) from this environment, not its editable Weir: a
    # path line in a .pth file adds the directory without running the .pth files inside it.
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return root / "bin" / "python"


def test_spark_workers_import_the_installed_weir_from_a_checkout_of_weir(tmp_path):
    python = installed_weir(tmp_path / "venv")
    checkout = tmp_path / "checkout"  # what the repository root holds: the facade folder
    shutil.copytree(REPO / "weir", checkout / "weir",
                    ignore=shutil.ignore_patterns("__pycache__"))
    driver = tmp_path / "driver" / "drive.py"
    driver.parent.mkdir()
    driver.write_text(textwrap.dedent(DRIVER))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}

    done = subprocess.run([str(python), str(driver)], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=300)

    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    where = next(line.split(" ", 1)[1] for line in done.stdout.splitlines()
                 if line.startswith("WORKER "))
    assert Path(where).is_relative_to(tmp_path / "venv")  # the installed package
    assert not Path(where).is_relative_to(checkout)
