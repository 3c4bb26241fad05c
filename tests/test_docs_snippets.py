"""Every config block and code block of README.md and docs/ works as written: a reader copies
them verbatim.

* ``properties`` and ``yaml`` blocks parse as Java properties / YAML, and every key they set is
  one Weir reads (or a Samza key it accepts and explains) with a valid value: an inline
  ``# comment`` after a value is part of the value in a .properties file, and shows up here;
* ``python`` blocks compile;
* ``bash`` and ``console`` blocks are valid shell, and every ``weir ...`` command line in them
  parses with the ``weir`` command's own parser (commands, arguments, options).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from weir.engine.cli import build_parser
from weir.engine.config.files import parse_properties, parse_yaml
from weir.engine.config.job import load_all_declarations, review_config
from weir.stores.config import Config

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)


def blocks(language: set[str]) -> list[tuple[str, str]]:
    """``(file:line language, text)`` of every fenced block in one of ``language``."""
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in _FENCE.finditer(text):
            if m.group(1) in language:
                line = text.count("\n", 0, m.start()) + 2
                out.append((f"{path.relative_to(REPO)}:{line} {m.group(1)}", m.group(2)))
    return out


CONFIGS = blocks({"properties", "yaml", "yml"})
PYTHON = blocks({"python"})
SHELL = blocks({"bash", "sh", "console", "shell"})


@pytest.mark.parametrize("where,text", CONFIGS, ids=[w for w, _ in CONFIGS])
def test_every_config_block_sets_keys_weir_reads_with_valid_values(where, text):
    parse = parse_yaml if where.endswith(("yaml", "yml")) else parse_properties
    pairs = list(parse(text, where))
    values = {k: v for k, v, _ in pairs}
    for key, value in values.items():
        assert not re.search(r"\s#", value), (
            f"{where}: the value of {key} holds an inline comment ({value!r}); a .properties "
            f"file keeps it as part of the value: put the comment on its own line")
    load_all_declarations()
    review = review_config(Config(values, origins={k: f"{where}+{line}" for k, _, line in pairs}),
                           load_declarations=False)
    assert review.warnings == [], f"{where}: " + "; ".join(w.message for w in review.warnings)


@pytest.mark.parametrize("where,text", PYTHON, ids=[w for w, _ in PYTHON])
def test_every_python_block_compiles(where, text):
    compile(text, where, "exec")


def _weir_lines(text: str) -> list[str]:
    """The ``weir ...`` command lines of a shell block (continuations joined, prompts and
    trailing comments dropped)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", line):
            part = part.strip()
            if part.startswith("timeout "):
                part = re.sub(r"^timeout(\s+-s\s+\S+)?\s+\S+\s+", "", part)
            if part.startswith("weir "):
                out.append(part)
    return out


_REDIRECT = re.compile(r"^(\d*|&)(>>?|<)$")


def _without_redirections(words: list[str]) -> list[str]:
    """The command's own arguments: redirections (``2> run.log``, ``< /dev/null``) and a
    trailing ``&`` left out."""
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif _REDIRECT.match(word):
            skip = True
        elif word == "&" or re.match(r"^\d*>&\d$", word):
            continue
        else:
            out.append(word)
    return out


@pytest.mark.parametrize("where,text", SHELL, ids=[w for w, _ in SHELL])
def test_every_shell_block_is_valid_and_its_weir_commands_parse(where, text):
    lines = text.splitlines()
    if where.endswith("console"):  # commands after `$ `, the rest is their output
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    script = "\n".join(lines)
    if script.strip():
        checked = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
        assert checked.returncode == 0, f"{where}: {checked.stderr}"
    for line in _weir_lines(text):
        words = _without_redirections(shlex.split(line, comments=True)[1:])
        parser = build_parser(words[0] if words and not words[0].startswith("-") else None)
        try:
            parser.parse_args(words)
        except SystemExit as exc:
            if exc.code not in (0, None):
                pytest.fail(f"{where}: `{line}` does not parse (weir exits {exc.code})")
