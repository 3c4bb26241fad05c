"""Check real Samza job configs with Weir's config checker, and count the verdicts.

The configs are read straight from clones of Samza's public repositories (no copy is kept
here)::

    git clone https://github.com/apache/samza-hello-samza
    git clone https://github.com/apache/samza
    python examples/samza_configs/check_samza_configs.py \\
        --hello-samza samza-hello-samza --samza samza

It checks, from each repository, the config files of the revisions listed in
:data:`SOURCES` (hello-samza today and its last version before Samza 1.0, whose jobs still
named ``task.class``; samza-test's job configs), with the check ``weir run`` and ``weir
config show`` make before anything else (:func:`check`): every key against the declarations
(bad values and misspelt ``samza.*`` / ``metrics.*`` keys refused, unknown keys warned
about, Samza keys Weir does not use explained by notes), then every settings object of the
job (systems, serdes, stores, chooser, metrics reporters...). The task class is not checked:
a Samza task is a Java class, which a port replaces with a Python one. Each file gets one
verdict:

* **accepted**: nothing to say;
* **accepted with notes**: Samza keys Weir accepts and does not use (YARN, ZooKeeper, Kafka
  clients, replication factors ...), each topic explained;
* **accepted with warnings**: keys Weir ignores as unknown (with the closest key it reads);
* **refused**: a ConfigError names the key and why.

docs/PORTING.md reports the counts. Exit code 0 (the counts are the result).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from weir.engine.config.files import parse_properties, read_text
from weir.engine.config.job import JobConfig, load_all_declarations, review_config
from weir.engine.container.preflight import check_job
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config
from weir.stores.errors import WeirError

__all__ = ["SOURCES", "Verdict", "check", "main"]

SOURCES = [
    # (repository option, revision, path prefix, suffixes)
    ("hello_samza", "HEAD", "src/main/config/", (".properties",)),
    ("hello_samza", "108b6d5^", "src/main/config/", (".properties",)),
    ("samza", "HEAD", "samza-test/src/main/", (".properties", ".samza", ".samsa")),
]
"""What is checked: hello-samza's configs today (applications described in Java) and at
108b6d5^ (its last version before Samza 1.0: low-level jobs with task.class), and the job
configs of Samza's integration tests (samza-test)."""


_LABELS = {"hello_samza": "samza-hello-samza", "samza": "samza"}


@dataclass(frozen=True)
class Verdict:
    name: str
    kind: str                 # accepted, notes, warnings, refused
    detail: str


def _files(label: str, repo: Path, revision: str, prefix: str, suffixes: tuple[str, ...]
           ) -> list[tuple[str, str]]:
    names = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", revision,
                            prefix], capture_output=True, text=True, check=True).stdout.split()
    out = []
    for name in sorted(names):
        if name.endswith(suffixes):
            data = subprocess.run(["git", "-C", str(repo), "show", f"{revision}:{name}"],
                                  capture_output=True, check=True).stdout
            out.append((f"{label}@{revision}:{name}", read_text(name, data)))
    return out


def check(name: str, text: str, workdir: Path) -> Verdict:
    """The verdict of one config file (see the module docstring)."""
    pairs = list(parse_properties(text, name))
    values = {k: v for k, v, _ in pairs}
    config = Config(values, origins={k: f"{name}:{line}" for k, _, line in pairs})
    # Where a job keeps its files: a scratch directory (the check creates nothing there).
    config = config.merged({"job.data.dir": str(workdir / "data"),
                            **{f"systems.{s}.root": str(workdir / "log")
                               for s in _systems(config)}})
    try:
        review = review_config(config, load_declarations=False)
        if "job.name" in config or "app.name" in config:
            job = JobConfig.from_config(config.merged({"job.name": config.get_str(
                "job.name") or config.get_str("app.name")}))
            check_job(config, job, SystemRegistry(config))
    except WeirError as exc:
        return Verdict(name, "refused", f"{type(exc).__name__}: {exc}")
    if review.warnings:
        return Verdict(name, "warnings", "; ".join(w.message for w in review.warnings))
    if review.notes:
        return Verdict(name, "notes", ", ".join(n.topic.value for n in review.notes))
    return Verdict(name, "accepted", "")


def _systems(config: Config) -> set[str]:
    return {k.split(".")[1] for k in config if k.startswith("systems.") and k.count(".") >= 2}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hello-samza", type=Path, required=True,
                        help="a clone of https://github.com/apache/samza-hello-samza")
    parser.add_argument("--samza", type=Path, required=True,
                        help="a clone of https://github.com/apache/samza")
    args = parser.parse_args(argv)
    load_all_declarations()
    repos = {"hello_samza": args.hello_samza, "samza": args.samza}
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="weir-samza-configs-") as scratch:
        for repo, revision, prefix, suffixes in SOURCES:
            for name, text in _files(_LABELS[repo], repos[repo], revision, prefix, suffixes):
                verdicts.append(check(name, text, Path(scratch)))
    width = max(len(v.name) for v in verdicts)
    for v in verdicts:
        print(f"{v.name:<{width}}  {v.kind:<8}  {v.detail}")
    counts = Counter(v.kind for v in verdicts)
    print(f"\n{len(verdicts)} configs: {counts['accepted']} accepted, {counts['notes']} "
          f"accepted with notes, {counts['warnings']} accepted with warnings, "
          f"{counts['refused']} refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
