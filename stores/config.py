"""Config primitives shared by every package: the immutable :class:`Config` mapping and the
registry of declared keys.

Every key Weir understands is declared exactly once with :func:`declare` (name, type,
default, one-line doc, the component that reads it). Key names may hold placeholders in
angle brackets (``stores.<store>.factory``) that match one dotted name segment — or, for
``<stream>``, any run of segments. ``docs/CONFIG.md`` is generated from the declarations
(``weir config docs``), so the docs can never drift from the code.

Values are bounded by one parse, not one check per key: every integer fits in a signed 64-bit
integer (what Samza's Java reads as a ``long``), every number is finite, a duration (an
integer key named ``*.ms``) is -1 or more (-1 is the only negative value: where the key allows
it, it turns the thing off) and at most :data:`MAX_DURATION_MS`, and a declaration may narrow
the range (``declare(..., minimum=1)``). A value out of range is a ConfigError naming the key,
where it was set and the range.

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

import math
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
    "INT_MIN",
    "INT_MAX",
    "MAX_DURATION_MS",
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


INT_MIN = -(2 ** 63)
INT_MAX = 2 ** 63 - 1
"""The range of every integer value: a signed 64-bit integer (Java's ``long``)."""
MAX_DURATION_MS = INT_MAX // 1_000_000
"""The longest duration a ``*.ms`` key takes (~292 years): its nanoseconds fit in 64 bits, and
so does every wait the engine derives from it (Python's ``threading.TIMEOUT_MAX``)."""
_DURATION_SUFFIX = ".ms"


def _parse_int(raw: str) -> int:
    value = int(raw.strip().replace("_", ""))
    if not INT_MIN <= value <= INT_MAX:
        raise ValueError(f"{value} does not fit in a signed 64-bit integer: it must be from "
                         f"{INT_MIN} to {INT_MAX}")
    return value


def _parse_float(raw: str) -> float:
    value = float(raw.strip())
    if not math.isfinite(value):
        raise ValueError(f"{raw.strip()} is not a finite number")
    return value


_PARSERS: dict[Any, Callable[[str], Any]] = {
    str: lambda raw: raw.strip(),
    int: _parse_int,
    float: _parse_float,
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
        return self._parse(key, _parse_float, "number") if key in self._values else default

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
    ``choices`` restricts string values (compared case-insensitively). ``minimum`` and
    ``maximum`` bound an ``int`` or ``float`` value (inclusive; :func:`declare` fills in the
    range of a duration).
    """

    name: str
    type: Any
    default: Any
    doc: str
    component: str
    choices: tuple[str, ...] | None = None
    aliases: tuple[str, ...] = ()
    minimum: int | float | None = None
    maximum: int | float | None = None
    module: str = field(default="", compare=False)
    """The module that declared it (what imports it; the generated key index lists it)."""

    @property
    def pattern(self) -> re.Pattern:
        """The regular expression concrete names of this key match (compiled on first use:
        a process declares ~160 keys and matches few of them)."""
        return _pattern(self.name)

    @property
    def is_duration(self) -> bool:
        """An integer key named ``*.ms``: milliseconds."""
        return self.type is int and self.name.endswith(_DURATION_SUFFIX)

    @property
    def type_name(self) -> str:
        """The type as docs/CONFIG.md shows it, with the range when it is bounded
        (``integer (ms), at least 1``; the longest duration is left out: it is every
        duration's)."""
        if isinstance(self.type, type) and issubclass(self.type, Enum):
            return "enum"
        name = _TYPE_NAMES.get(self.type) or getattr(
            self.type, "type_name", getattr(self.type, "__name__", str(self.type)))
        if self.is_duration:
            name += " (ms)"
        low = self.minimum
        high = None if self.is_duration and self.maximum == MAX_DURATION_MS else self.maximum
        if low is not None and high is not None:
            return f"{name}, {low:,} to {high:,}"
        if low is not None:
            return f"{name}, at least {low:,}"
        if high is not None:
            return f"{name}, at most {high:,}"
        return name

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
        value = config._parse(concrete, parser, _TYPE_NAMES.get(self.type) or getattr(
            self.type, "type_name", "value"))
        if (self.minimum is not None and value < self.minimum) or \
                (self.maximum is not None and value > self.maximum):
            raise ConfigError(f"bad value {config[concrete]!r}: expected {self._range()}",
                              key=concrete, origin=config.origin(concrete))
        return value

    def _range(self) -> str:
        what = "an integer" if self.type is int else "a number"
        low, high = self.minimum, self.maximum
        if low is not None and high is not None:
            text = f"{what} from {low:,} to {high:,}"
        elif low is not None:
            text = f"{what} of at least {low:,}"
        else:
            text = f"{what} of at most {high:,}"
        if self.is_duration:
            text += (" (milliseconds; -1 is the only negative value, where the key allows "
                     "turning it off)" if low == -1 else " (milliseconds)")
        return text


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
            choices: tuple[str, ...] | None = None, aliases: tuple[str, ...] = (),
            minimum: int | float | None = None,
            maximum: int | float | None = None) -> ConfigKey:
    """Declare a config key once. Declaring the same name twice with a different definition is
    a programming error and raises ``ValueError``.

    ``minimum`` / ``maximum`` bound an ``int`` or ``float`` value (inclusive). An integer key
    named ``*.ms`` is a duration: unless declared otherwise, from -1 (the one negative value:
    "off", "never" or "no limit" where the key says so) to :data:`MAX_DURATION_MS`.
    """
    if type is int and name.endswith(_DURATION_SUFFIX):
        minimum = -1 if minimum is None else minimum
        maximum = MAX_DURATION_MS if maximum is None else min(maximum, MAX_DURATION_MS)
    key = ConfigKey(name, type, default, doc, component, choices, aliases, minimum, maximum,
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
