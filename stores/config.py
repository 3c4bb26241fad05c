"""Config primitives shared by every package: the immutable :class:`Config` mapping and the
registry of declared keys.

Every key Weir understands is declared exactly once with :func:`declare` (name, type,
default, one-line doc, the component that reads it). Key names may hold placeholders in
angle brackets (``stores.<store>.factory``) that match one dotted name segment — or, for
``<stream>``, any run of segments. ``docs/CONFIG.md`` is generated from the declarations
(``weir config docs``), so the docs can never drift from the code.

Loading files (``.properties``, YAML), ``--set`` overrides and unknown-key warnings live in
``weir.engine.config.job``; this module only knows values and where they came from.

Example::

    >>> from weir.stores.config import Config, declare
    >>> CACHE = declare("example.cache.size", int, 1000, "Entries in the example cache.",
    ...                 component="docs example")
    >>> cfg = Config({"example.cache.size": "250"}, origins={"example.cache.size": "job.properties:3"})
    >>> CACHE.get(cfg)
    250
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable

from weir.stores.errors import ConfigError

__all__ = [
    "Config",
    "ConfigKey",
    "declare",
    "declared_keys",
    "find_declared",
    "parse_bool",
    "parse_list",
]

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


def parse_bool(raw: str) -> bool:
    """Parse a boolean the way Java properties users expect (``true``/``false``, case-insensitive)."""
    low = raw.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


def parse_list(raw: str) -> list[str]:
    """Split a comma-separated list, trimming entries and dropping empty ones."""
    return [part.strip() for part in raw.split(",") if part.strip()]


def _parse_int(raw: str) -> int:
    return int(raw.strip().replace("_", ""))


_PARSERS: dict[Any, Callable[[str], Any]] = {
    str: lambda raw: raw.strip(),
    int: _parse_int,
    float: lambda raw: float(raw.strip()),
    bool: parse_bool,
    list: parse_list,
}

_TYPE_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "list"}
_ARTICLE = {"integer": "an integer", "list": "a list"}


class Config(Mapping[str, str]):
    """An immutable mapping of config keys to string values, remembering where each was set.

    ``origins`` maps a key to ``"file:line"`` (or ``"--set"``, ``"coordinator stream"``) and
    is used in every error message about that key.
    """

    __slots__ = ("_values", "_origins")

    def __init__(self, values: Mapping[str, Any] | None = None, *,
                 origins: Mapping[str, str] | None = None):
        self._values: dict[str, str] = {str(k): str(v) for k, v in (values or {}).items()}
        self._origins: dict[str, str] = dict(origins or {})

    # -- Mapping -------------------------------------------------------------------------
    def __getitem__(self, key: str) -> str:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Config({self._values!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Config):
            return self._values == other._values
        if isinstance(other, Mapping):
            return self._values == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._values.items()))

    # -- provenance ----------------------------------------------------------------------
    def origin(self, key: str) -> str | None:
        """Where ``key`` was set (``"job.properties:12"``), or None if unknown or unset."""
        return self._origins.get(key)

    @property
    def origins(self) -> Mapping[str, str]:
        return dict(self._origins)

    # -- derivation ----------------------------------------------------------------------
    def merged(self, other: Mapping[str, Any], *, origin: str | None = None) -> "Config":
        """A new Config with ``other``'s keys overriding these. ``origin`` labels the new keys
        (or, if ``other`` is a Config, its own origins are kept)."""
        values = dict(self._values)
        origins = dict(self._origins)
        for k, v in other.items():
            values[str(k)] = str(v)
            if isinstance(other, Config) and other.origin(k):
                origins[k] = other.origin(k)  # type: ignore[assignment]
            elif origin:
                origins[k] = origin
            else:
                origins.pop(k, None)
        return Config(values, origins=origins)

    def subset(self, prefix: str, *, strip: bool = True) -> "Config":
        """Keys starting with ``prefix``; with ``strip`` the prefix is removed from the names."""
        values, origins = {}, {}
        for k, v in self._values.items():
            if k.startswith(prefix):
                nk = k[len(prefix):] if strip else k
                values[nk] = v
                if k in self._origins:
                    origins[nk] = self._origins[k]
        return Config(values, origins=origins)

    # -- typed getters -------------------------------------------------------------------
    def _parse(self, key: str, parser: Callable[[str], Any], type_name: str,
               allowed: str | None = None) -> Any:
        raw = self._values[key]
        try:
            return parser(raw)
        except (ValueError, TypeError) as exc:
            hint = allowed or _ARTICLE.get(type_name, f"a {type_name}")
            raise ConfigError(f"bad value {raw!r}: expected {hint} ({exc})",
                              key=key, origin=self.origin(key)) from None

    def get_str(self, key: str, default: str | None = None) -> str | None:
        return self._values[key].strip() if key in self._values else default

    def get_int(self, key: str, default: int | None = None) -> int | None:
        return self._parse(key, _parse_int, "integer") if key in self._values else default

    def get_float(self, key: str, default: float | None = None) -> float | None:
        return self._parse(key, float, "number") if key in self._values else default

    def get_bool(self, key: str, default: bool | None = None) -> bool | None:
        return self._parse(key, parse_bool, "boolean", "true or false") if key in self._values else default

    def get_list(self, key: str, default: list[str] | None = None) -> list[str] | None:
        return parse_list(self._values[key]) if key in self._values else default

    def get_enum(self, key: str, enum: type[Enum], default: Enum | None = None) -> Enum | None:
        """Parse an Enum by value or name, case-insensitively."""
        if key not in self._values:
            return default
        raw = self._values[key].strip().lower()
        for member in enum:
            if str(member.value).lower() == raw or member.name.lower() == raw:
                return member
        allowed = ", ".join(str(m.value) for m in enum)
        raise ConfigError(f"bad value {self._values[key]!r}: expected one of {allowed}",
                          key=key, origin=self.origin(key))

    def require(self, key: str) -> str:
        """The value of a key that must be set; raises ConfigError naming it otherwise."""
        if key not in self._values:
            raise ConfigError("is required but not set; add it to the job config", key=key)
        return self._values[key].strip()


@dataclass(frozen=True)
class ConfigKey:
    """One declared config key.

    ``name`` may contain placeholders such as ``<store>``; call :meth:`key` to fill them in.
    ``type`` is one of ``str``, ``int``, ``float``, ``bool``, ``list`` or an ``Enum`` class.
    ``choices`` restricts string values (compared case-insensitively).
    """

    name: str
    type: Any
    default: Any
    doc: str
    component: str
    choices: tuple[str, ...] | None = None
    aliases: tuple[str, ...] = ()
    module: str = field(default="", compare=False)
    """The module that declared it (what imports it; the generated key index lists it)."""

    @property
    def pattern(self) -> re.Pattern:
        """The regular expression concrete names of this key match (compiled on first use:
        a process declares ~160 keys and matches few of them)."""
        return _pattern(self.name)

    @property
    def type_name(self) -> str:
        if isinstance(self.type, type) and issubclass(self.type, Enum):
            return "enum"
        return _TYPE_NAMES.get(self.type) or getattr(
            self.type, "type_name", getattr(self.type, "__name__", str(self.type)))

    def key(self, **placeholders: str) -> str:
        """The concrete key name: ``STORE_FACTORY.key(store="counts")``."""
        name = self.name
        for ph, value in placeholders.items():
            name = name.replace(f"<{ph}>", value)
        return name

    def get(self, config: Config | Mapping[str, str], **placeholders: str) -> Any:
        """The parsed value of this key (or of its first alias that is set), else the default."""
        if not isinstance(config, Config):
            config = Config(config)
        for name in (self.name, *self.aliases):
            for ph, value in placeholders.items():
                name = name.replace(f"<{ph}>", value)
            if name in config:
                return self.parse(config, name)
        return self.default

    def parse(self, config: Config, concrete: str) -> Any:
        """Parse the value set for ``concrete`` (a name matching this key) per its type."""
        if isinstance(self.type, type) and issubclass(self.type, Enum):
            return config.get_enum(concrete, self.type)
        parser = _PARSERS.get(self.type) or getattr(self.type, "parse_value", None)
        if parser is None:
            raise TypeError(f"config key {self.name}: unsupported type {self.type!r}")
        if self.choices:
            value = config.get_str(concrete)
            low = {c.lower(): c for c in self.choices}
            if value is None or value.lower() not in low:
                raise ConfigError(
                    f"bad value {config[concrete]!r}: expected one of {', '.join(self.choices)}",
                    key=concrete, origin=config.origin(concrete))
            return low[value.lower()]
        return config._parse(concrete, parser, _TYPE_NAMES.get(self.type) or getattr(
            self.type, "type_name", "value"))


def _compile(name: str) -> re.Pattern:
    parts = re.split(r"(<[a-z_-]+>)", name)
    regex = []
    for part in parts:
        if part == "<stream>" or part == "<class>":
            regex.append(r"[^=]+?")  # stream names may contain dots
        elif part.startswith("<") and part.endswith(">"):
            regex.append(r"[^.]+")
        else:
            regex.append(re.escape(part))
    return re.compile("^" + "".join(regex) + "$")


_REGISTRY: dict[str, ConfigKey] = {}


def declare(name: str, type: Any, default: Any, doc: str, *, component: str,
            choices: tuple[str, ...] | None = None, aliases: tuple[str, ...] = ()) -> ConfigKey:
    """Declare a config key once. Declaring the same name twice with a different definition is
    a programming error and raises ``ValueError``."""
    key = ConfigKey(name, type, default, doc, component, choices, aliases,
                    sys._getframe(1).f_globals.get("__name__", ""))
    existing = _REGISTRY.get(name)
    if existing is not None and existing != key:
        raise ValueError(f"config key {name} declared twice with different definitions")
    _REGISTRY[name] = key
    return key


def declared_keys() -> list[ConfigKey]:
    """All declared keys, sorted by name."""
    return sorted(_REGISTRY.values(), key=lambda k: k.name)


def find_declared(concrete: str) -> ConfigKey | None:
    """The declaration a concrete key name matches (directly or as an alias), if any."""
    if concrete in _REGISTRY:
        return _REGISTRY[concrete]
    for key in _REGISTRY.values():
        for name in (key.name, *key.aliases):
            head, tail = _ends(name)
            if concrete.startswith(head) and concrete.endswith(tail) \
                    and _pattern(name).match(concrete):
                return key
    return None


_ENDS: dict[str, tuple[str, str]] = {}


def _ends(name: str) -> tuple[str, str]:
    """The literal text before the first and after the last placeholder of a declared name
    (the whole name twice when it has none): a concrete name must start and end with them,
    which rules out most declarations before a regular expression is compiled or run."""
    ends = _ENDS.get(name)
    if ends is None:
        ends = _ENDS[name] = ((name.partition("<")[0], name.rpartition(">")[2]) if "<" in name
                              else (name, name))
    return ends


_PATTERNS: dict[str, re.Pattern] = {}


def _pattern(name: str) -> re.Pattern:
    """:func:`_compile`, once per name."""
    pattern = _PATTERNS.get(name)
    if pattern is None:
        pattern = _PATTERNS[name] = _compile(name)
    return pattern
