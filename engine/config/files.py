"""Reading config files: Java ``.properties`` and YAML, each entry with its source line.

Both readers return ``(key, value, line)`` triples in file order; the caller builds the
:class:`~weir.stores.config.Config` (later duplicates win). Internal to :mod:`weir.engine.config.job`.

``.properties`` follows ``java.util.Properties.load`` exactly (the files Samza users bring):

* a logical line ends at ``\\n``, ``\\r`` or ``\\r\\n`` unless it ends in an odd number of
  backslashes, which joins it with the next line minus that line's leading whitespace; a blank
  continuation line ends the logical line;
* leading whitespace (space, tab, form feed) is skipped; a line whose first other character is
  ``#`` or ``!`` is a comment (a comment never continues);
* the key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace around one
  ``=``/``:`` separator is skipped; trailing whitespace of the value is kept;
* escapes: ``\\t \\n \\r \\f``, ``\\uXXXX`` (surrogate pairs combined), and ``\\`` before any
  other character stands for that character.

YAML mappings are flattened to dotted keys, lists of scalars joined with commas, booleans
written ``true``/``false``, nulls as the empty string; other scalars keep their text as
written (``0.50`` stays ``0.50``). Merge keys (``<<: *anchor``) are supported: a key of the
mapping itself wins over a merged one wherever it is written, an earlier merged mapping over a
later one (YAML's rule). Stricter than YAML loaders: a key written twice in one mapping, also
through different nesting (``task.commit.ms`` and ``task: {commit.ms: ...}``), is a
ConfigError naming the key and both lines (PyYAML keeps the last without a word), and a
document that is not a mapping (a list, a scalar) is one naming its line.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from weir.stores.errors import ConfigError

if TYPE_CHECKING:
    import yaml  # imported when a YAML config is read (a .properties job never pays for it)

__all__ = ["parse_properties", "parse_yaml", "read_text"]

_WS = " \t\f"
_NEWLINES = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = set("0123456789abcdefABCDEF")


def _syntax_error(message: str, origin: str) -> ConfigError:
    """A ConfigError about a place in a file rather than a key: the message starts with it."""
    return ConfigError(message, origin=origin)


def read_text(path: str, data: bytes) -> str:
    """Decode a config file: UTF-8 (BOM allowed), else ISO-8859-1 as Java's ``load`` does."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


# -- .properties ------------------------------------------------------------------------------

def _odd_trailing_backslashes(text: str) -> bool:
    count = len(text) - len(text.rstrip("\\"))
    return count % 2 == 1


def _logical_lines(text: str):
    """Yield ``(line_number, logical_line)``; the line number is where the entry starts."""
    lines = _NEWLINES.split(text)
    i, n = 0, len(lines)
    while i < n:
        start = i + 1
        line = lines[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _odd_trailing_backslashes(line):
            line = line[:-1]
            if i >= n:
                break
            nxt = lines[i].lstrip(_WS)
            i += 1
            if not nxt:
                break
            line += nxt
        yield start, line


def _split_entry(line: str) -> tuple[str, str]:
    """Split a logical line into raw (still escaped) key and value, as ``Properties.load0``."""
    limit = len(line)
    key_len, value_start, has_sep, backslash = 0, limit, False, False
    while key_len < limit:
        c = line[key_len]
        if c in "=:" and not backslash:
            value_start, has_sep = key_len + 1, True
            break
        if c in _WS and not backslash:
            value_start = key_len + 1
            break
        backslash = (not backslash) if c == "\\" else False
        key_len += 1
    while value_start < limit:
        c = line[value_start]
        if c not in _WS:
            if not has_sep and c in "=:":
                has_sep = True
            else:
                break
        value_start += 1
    return line[:key_len], line[value_start:]


def _unescape(raw: str, *, what: str, origin: str) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:
            break  # a lone trailing backslash stands for nothing
        c = raw[i]
        i += 1
        if c == "u":
            digits = raw[i:i + 4]
            if len(digits) != 4 or not set(digits) <= _HEX:
                bad = "\\u" + digits
                raise _syntax_error(
                    f"malformed \\uXXXX escape {bad!r} in {what}: write exactly four "
                    f"hex digits (e.g. \\u00e9) or escape the backslash as \\\\", origin)
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    text = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in text):  # join UTF-16 surrogate pairs
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def parse_properties(text: str, source: str) -> list[tuple[str, str, int]]:
    """Entries of a Java ``.properties`` text; ``source`` names the file in origins and errors.

    >>> parse_properties("a = 1\\n# note\\nb: x\\\\\\n   y\\nc\\\\u00e9 z\\n", "job.properties")
    [('a', '1', 1), ('b', 'xy', 3), ('cé', 'z', 5)]
    """
    entries: list[tuple[str, str, int]] = []
    for line_no, line in _logical_lines(text):
        origin = f"{source}:{line_no}"
        raw_key, raw_value = _split_entry(line)
        key = _unescape(raw_key, what="a key", origin=origin)
        if not key:
            raise _syntax_error(f"entry {line.strip()!r} has an empty key; write `key=value`",
                                origin)
        value = _unescape(raw_value, what=f"the value of '{key}'", origin=origin)
        entries.append((key, value, line_no))
    return entries


# -- YAML ---------------------------------------------------------------------------------------

_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_MERGE = "tag:yaml.org,2002:merge"


def _scalar_text(node: yaml.ScalarNode) -> str:
    if node.tag == _BOOL:
        return "true" if node.value.strip().lower() in ("true", "yes", "on", "y") else "false"
    if node.tag == _NULL:
        return ""
    return node.value


def _kind(node: yaml.Node) -> str:
    import yaml
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return "a scalar" if isinstance(node, yaml.ScalarNode) else "a mapping"


def _flatten(node: yaml.Node, prefix: str, source: str) -> dict[str, tuple[str, int]]:
    """The entries under ``node``: dotted key -> (value, line)."""
    import yaml
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        return _flatten_mapping(node, prefix, source)
    if isinstance(node, yaml.SequenceNode):
        items = []
        for item in node.value:
            if not isinstance(item, yaml.ScalarNode):
                raise ConfigError(
                    "a list may only hold plain values (it is joined with commas)",
                    key=prefix, origin=f"{source}:{item.start_mark.line + 1}")
            items.append(_scalar_text(item))
        return {prefix: (",".join(items), line)}
    return {prefix: (_scalar_text(node), line)}


def _flatten_mapping(node: yaml.MappingNode, prefix: str,
                     source: str) -> dict[str, tuple[str, int]]:
    import yaml
    own: dict[str, tuple[str, int]] = {}
    merged: list[dict[str, tuple[str, int]]] = []
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE:
            for m in value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]:
                if not isinstance(m, yaml.MappingNode):
                    raise _syntax_error(f"a merge key (<<) takes a mapping, not {_kind(m)}",
                                        f"{source}:{m.start_mark.line + 1}")
                merged.append(_flatten_mapping(m, prefix, source))
            continue
        if not isinstance(key_node, yaml.ScalarNode):
            raise _syntax_error("mapping keys must be plain names",
                                f"{source}:{key_node.start_mark.line + 1}")
        name = key_node.value.strip()
        for key, (value, line) in _flatten(value_node, f"{prefix}.{name}" if prefix else name,
                                           source).items():
            if key in own:
                raise ConfigError(
                    f"is set twice: at {source}:{own[key][1]} and here; YAML would keep only "
                    f"the last without a word. Remove one", key=key, origin=f"{source}:{line}")
            own[key] = (value, line)
    for entries in merged:  # the mapping's own keys win, then earlier merged mappings
        for key, entry in entries.items():
            own.setdefault(key, entry)
    return own


def parse_yaml(text: str, source: str) -> list[tuple[str, str, int]]:
    """Entries of a YAML text, nested mappings flattened to dotted keys.

    >>> parse_yaml("job:\\n  name: wc\\nstores:\\n  counts: {factory: rocksdb}\\n", "job.yaml")
    [('job.name', 'wc', 2), ('stores.counts.factory', 'rocksdb', 4)]
    """
    import yaml
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc)
        context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and context_mark is not None:
            problem += f" ({context} started at line {context_mark.line + 1})"
        raise _syntax_error(f"invalid YAML: {problem}", where) from None
    if root is None:
        return []
    if not isinstance(root, yaml.MappingNode):
        raise _syntax_error(f"a YAML config must be a mapping of keys to values, not "
                            f"{_kind(root)}", f"{source}:{root.start_mark.line + 1}")
    return [(key, value, line) for key, (value, line) in _flatten(root, "", source).items()]
