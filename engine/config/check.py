"""Checking a loaded config against the declarations: bad values fail, unknown keys warn --
except in the ``samza.*`` namespaces, where an unknown key is an error.

Unknown keys of a defined store (one with ``stores.<s>.factory``) are errors, not warnings:
the store's spec refuses them (:func:`weir.stores.spec.check_store_keys`), so the check raises
that same ConfigError instead of announcing that the key "is ignored". Keys of a store that is
not defined (no factory) are ignored, with a warning that says so.

Internal to :mod:`weir.engine.config.job`. Which keys are Weir's (and so may be "unknown"):

* everything under ``task.``, ``job.``, ``stores.``, ``serializers.`` and ``spark.weir.``;
* stream properties in the ``samza.`` namespace, in all three spellings of SAMZA-REFERENCE
  0.1: ``streams.<id>.samza.*``, ``systems.<s>.streams.<stream>.samza.*`` and
  ``systems.<s>.default.stream.samza.*`` (other stream properties belong to the system);
* ``systems.<s>.samza.*`` and, for a system whose factory is not a user class
  (``module:Class``), every other ``systems.<s>.*`` key.

A stream property declared in any one spelling is known (and parsed) in all three.

An unknown key in a ``samza.*`` namespace -- ``systems.<s>.samza.*`` or a stream property
``samza.*`` in any spelling -- raises :class:`UnknownSamzaKeyError` (a ConfigError) naming
every such key, its ``file:line`` and the closest valid key: a misspelt
``...samza.offset.default`` would otherwise leave the default in force, and the first
checkpoint would pin that starting position for good.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from enum import Enum

from weir.stores.config import Config, ConfigKey, declared_keys, find_declared
from weir.stores.errors import ConfigError
from weir.stores.spec import check_store_keys, stores_in

__all__ = ["ConfigWarning", "WarningKind", "UnknownSamzaKeyError", "check_config",
           "stream_prop_of"]

_OWNED_PREFIXES = ("task.", "job.", "stores.", "serializers.", "spark.weir.")
_SYSTEM_FACTORY_KEYS = ("systems.{s}.samza.factory", "systems.{s}.factory")
_PLACEHOLDER = re.compile(r"<[^>]+>")
_MULTI_SEGMENT = ("<stream>", "<class>")
_STREAM_PROP_FORMS = re.compile(
    r"^(?:streams\.<[^>]+>\.|systems\.<[^>]+>\.streams\.<[^>]+>\.|"
    r"systems\.<[^>]+>\.default\.stream\.)(samza\..+)$")


class WarningKind(Enum):
    """What a :class:`ConfigWarning` is about."""

    UNKNOWN_KEY = "unknown-key"
    UNDEFINED_STORE = "undefined-store"
    """A ``stores.<s>.*`` key of a store without ``stores.<s>.factory``."""


@dataclass(frozen=True)
class ConfigWarning:
    """A problem in a config that does not stop the job: the key is ignored.

    ``suggestion`` is the closest declared key (placeholders filled from ``key``), if any.
    """

    kind: WarningKind
    key: str
    origin: str | None
    suggestion: str | None = None

    @property
    def message(self) -> str:
        where = f" (set at {self.origin})" if self.origin else ""
        if self.kind is WarningKind.UNDEFINED_STORE:
            store = self.key.split(".")[1]
            hint = (f"did you mean '{self.suggestion}'?" if self.suggestion else
                    f"set stores.{store}.factory (rocksdb, lmdb or memory) to define it")
            return (f"config key '{self.key}'{where} is ignored: no store '{store}' is defined "
                    f"(stores.{store}.factory is not set); {hint}")
        hint = (f"; did you mean '{self.suggestion}'?" if self.suggestion
                else "; see docs/CONFIG.md for the keys Weir reads")
        return f"unknown config key '{self.key}'{where} is ignored{hint}"

    def __str__(self) -> str:
        return self.message


class UnknownSamzaKeyError(ConfigError):
    """Unknown keys in a ``samza.*`` namespace (see the module docstring); ``unknown`` holds
    one :class:`ConfigWarning` per key (key, origin, suggestion)."""

    def __init__(self, unknown: list[ConfigWarning]):
        first, rest = unknown[0], unknown[1:]
        others = "".join(f"; also unknown: '{w.key}'"
                         + (f" (set at {w.origin})" if w.origin else "")
                         + (f", did you mean '{w.suggestion}'?" if w.suggestion else "")
                         for w in rest)
        hint = (f"did you mean '{first.suggestion}'?" if first.suggestion
                else "see docs/CONFIG.md for the samza.* keys Weir reads")
        super().__init__(
            f"unknown key in the samza.* namespace; {hint} Weir refuses it instead of "
            f"ignoring it: a misspelt samza.* key would silently leave its default in force"
            f"{others}", key=first.key, origin=first.origin)
        self.unknown = list(unknown)


# -- ownership ----------------------------------------------------------------------------------

def stream_prop_of(key: str) -> str | None:
    """The ``samza.*`` property a stream-property key sets (``streams.<id>.samza.*``,
    ``systems.<s>.streams.<stream>.samza.*``, ``systems.<s>.default.stream.samza.*``), or
    None if it is not one."""
    if key.startswith("streams."):
        head, sep, prop = key.partition(".samza.")
        return "samza." + prop if sep and head.count(".") >= 1 else None
    if key.startswith("systems."):
        parts = key.split(".")
        if len(parts) > 3 and parts[2] == "streams":
            idx = key.find(".samza.", len(".".join(parts[:4])))
            return key[idx + 1:] if idx >= 0 else None
        if len(parts) > 4 and parts[2] == "default" and parts[3] == "stream" and parts[4] == "samza":
            return ".".join(parts[4:])
    return None


def _user_system(config: Config, system: str) -> bool:
    for pattern in _SYSTEM_FACTORY_KEYS:
        value = config.get(pattern.format(s=system))
        if value is not None:
            return ":" in value
    return False


def _owned(config: Config, key: str) -> bool:
    if key.startswith(_OWNED_PREFIXES):
        return True
    if key.startswith("streams."):
        return stream_prop_of(key) is not None
    if key.startswith("systems."):
        parts = key.split(".")
        if len(parts) < 3:
            return True
        if parts[2] == "streams" or parts[2:4] == ["default", "stream"]:
            return stream_prop_of(key) is not None
        return parts[2] == "samza" or not _user_system(config, parts[1])
    return False


# -- lookup -------------------------------------------------------------------------------------

def _stream_prop_declarations() -> dict[str, ConfigKey]:
    table: dict[str, ConfigKey] = {}
    for decl in declared_keys():
        for name in (decl.name, *decl.aliases):
            m = _STREAM_PROP_FORMS.match(name)
            if m:
                table.setdefault(m.group(1), decl)
    return table


def _declaration(key: str, stream_props: dict[str, ConfigKey]) -> ConfigKey | None:
    decl = find_declared(key)
    if decl is not None:
        return decl
    prop = stream_prop_of(key)
    return stream_props.get(prop) if prop else None


# -- did you mean -------------------------------------------------------------------------------

def _fill(name: str, key: str) -> str:
    """``name`` with its placeholders taken from the matching segments of ``key``."""
    if "<" not in name:
        return name
    pat = name.split(".")
    segs = key.split(".")
    out: list[str] = []
    i = 0
    for j, part in enumerate(pat):
        if part in _MULTI_SEGMENT:
            take = max(1, len(segs) - i - (len(pat) - j - 1))
            out.append(".".join(segs[i:i + take]) if i < len(segs) else part)
            i += take
        elif _PLACEHOLDER.fullmatch(part):
            out.append(segs[i] if i < len(segs) else part)
            i += 1
        else:
            out.append(part)
            i += 1
    return ".".join(out)


def _suggest(key: str, declared: list[ConfigKey]) -> str | None:
    candidates: dict[str, None] = {}
    for decl in declared:
        for name in (decl.name, *decl.aliases):
            candidates.setdefault(_fill(name, key), None)
    matches = difflib.get_close_matches(key, list(candidates), n=1, cutoff=0.75)
    return matches[0] if matches else None


def _suggest_store(parts: list[str], stores: list[str], decl: ConfigKey | None,
                   declared: list[ConfigKey]) -> str | None:
    """For a key of an undefined store: the key with the closest defined store's name (a typo
    in the name), else the closest declared key when the key itself is unknown."""
    close = difflib.get_close_matches(parts[1], stores, n=1, cutoff=0.6)
    if close:
        return ".".join([parts[0], close[0], *parts[2:]])
    return None if decl is not None else _suggest(".".join(parts), declared)


# -- the check ----------------------------------------------------------------------------------

def _samza_namespace(key: str) -> bool:
    """``systems.<s>.samza.*``, or a ``samza.*`` stream property in any spelling."""
    if stream_prop_of(key) is not None:
        return True
    parts = key.split(".")
    return len(parts) > 3 and parts[0] == "systems" and parts[2] == "samza"


def check_config(config: Config) -> list[ConfigWarning]:
    """Parse every set key that has a declaration (a bad value raises ConfigError) and return
    a warning for every unknown key under a prefix Weir owns, in key order. An unknown key of
    a defined store raises ConfigError (see the module docstring); unknown keys in a
    ``samza.*`` namespace raise :class:`UnknownSamzaKeyError`."""
    stores = stores_in(config)
    for store in stores:
        check_store_keys(config, store)
    defined = set(stores)
    stream_props = _stream_prop_declarations()
    declared = declared_keys()
    warnings: list[ConfigWarning] = []
    errors: list[ConfigWarning] = []
    for key in sorted(config):
        decl = _declaration(key, stream_props)
        parts = key.split(".")
        if parts[0] == "stores" and len(parts) > 2 and parts[1] not in defined:
            warnings.append(ConfigWarning(WarningKind.UNDEFINED_STORE, key, config.origin(key),
                                          _suggest_store(parts, stores, decl, declared)))
            continue
        if decl is not None:
            decl.parse(config, key)
        elif _owned(config, key):
            found = ConfigWarning(WarningKind.UNKNOWN_KEY, key, config.origin(key),
                                  _suggest(key, declared))
            (errors if _samza_namespace(key) else warnings).append(found)
    if errors:
        raise UnknownSamzaKeyError(errors)
    return warnings
