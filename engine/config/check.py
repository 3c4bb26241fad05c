"""Checking a loaded config against the declarations: bad values fail, unknown keys warn --
except in the ``samza.*`` namespaces, where an unknown key is an error.

Unknown keys of a defined store (one with ``stores.<s>.factory``) are errors, not warnings:
the store's spec refuses them (:func:`weir.stores.spec.check_store_keys`), so the check raises
that same ConfigError instead of announcing that the key "is ignored". Keys of a store that is
not defined (no factory) are ignored, with a warning that says so.

Internal to :mod:`weir.engine.config.job`. Which keys are Weir's (and so may be "unknown"):

* everything under ``task.``, ``job.``, ``stores.``, ``serializers.`` and ``spark.weir.``;
* stream properties in the ``samza.`` namespace, in all three of Samza's spellings
  (docs/CONFIGURATION.md, "Checks"): ``streams.<id>.samza.*``, ``systems.<s>.streams.<stream>.samza.*`` and
  ``systems.<s>.default.stream.samza.*`` (other stream properties belong to the system);
* ``systems.<s>.samza.*`` and, for a system whose factory is not a user class
  (``module:Class``), every other ``systems.<s>.*`` key.

A stream property declared in any one spelling is known (and parsed) in all three.

An unknown key in a namespace where a typo would silently change what runs -- the
``samza.*`` namespaces (``systems.<s>.samza.*``, a stream property ``samza.*`` in any
spelling) and ``metrics.*`` -- raises :class:`UnknownSamzaKeyError` (a ConfigError) naming
every such key, its ``file:line`` and the closest valid key: a misspelt
``...samza.offset.default`` would otherwise leave the default in force, and the first
checkpoint would pin that starting position for good; a misspelt
``metrics.reporter.intervl.ms`` would leave reporting off.

Samza keys Weir accepts and does not use (YARN, ZooKeeper, Kafka clients, replication
factors: :mod:`weir.engine.config.samza_keys`) are neither warnings nor errors: they come back
as :class:`~weir.engine.config.samza_keys.ConfigNote` s from :func:`review_config`, one per
topic, saying what Weir does instead. Keys of a reporter named in
``metrics.reporter.<name>.*`` but not listed in ``metrics.reporters`` are ignored with a
warning, as Samza ignores them.

The closest valid key is one of the same shape: the same number of dotted segments, each
placeholder filled with the key's own segment at that place, and each literal segment close
to the key's segment there, so ``systems.kafka.producer.bootstrap.servers`` is never told
about a ``systems.kafka.streams.bootstrap.fsync.every.ms`` it does not resemble, nor a stream
id offered as a system name.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from enum import Enum

from weir.stores.config import Config, ConfigKey, declared_keys, find_declared
from weir.stores.engines.registry import engine_names
from weir.stores.errors import ConfigError
from weir.stores.spec import check_store_keys, stores_in

from weir.engine.config.samza_keys import ConfigNote, samza_notes, topic_of
from weir.engine.metrics.settings import METRICS_REPORTERS, reporter_key_owner

__all__ = ["ConfigWarning", "WarningKind", "UnknownSamzaKeyError", "check_config",
           "review_config", "ConfigReview", "stream_prop_of"]

_OWNED_PREFIXES = ("task.", "job.", "stores.", "serializers.", "spark.weir.", "metrics.")
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
    UNLISTED_REPORTER = "unlisted-reporter"
    """A ``metrics.reporter.<name>.*`` key of a reporter ``metrics.reporters`` does not list."""


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
                    f"set stores.{store}.factory ({engine_names()}) to define it")
            return (f"config key '{self.key}'{where} is ignored: no store '{store}' is defined "
                    f"(stores.{store}.factory is not set); {hint}")
        if self.kind is WarningKind.UNLISTED_REPORTER:
            name = self.key.split(".")[2]
            hint = (f"; did you mean '{self.suggestion}'?" if self.suggestion
                    else f"; add '{name}' to metrics.reporters to use it")
            return (f"config key '{self.key}'{where} is ignored: metrics.reporters does not "
                    f"list the reporter '{name}'{hint}")
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
        space = "metrics.*" if first.key.startswith("metrics.") else "samza.*"
        hint = (f"did you mean '{first.suggestion}'?" if first.suggestion
                else f"see docs/CONFIG.md for the {space} keys Weir reads")
        super().__init__(
            f"unknown key in the {space} namespace; {hint} Weir refuses it instead of "
            f"ignoring it: a misspelt {space} key would silently leave its default in force"
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


def _same_shape(name: str, filled: str, key: str) -> bool:
    """Whether ``filled`` (declared ``name`` with placeholders from ``key``) has ``key``'s
    shape: as many segments, and every literal segment of ``name`` close to ``key``'s
    segment at that place (placeholders take the key's own segments)."""
    segs, got = key.split("."), filled.split(".")
    if len(got) != len(segs):
        return False
    pattern = name.split(".")
    if any(part in _MULTI_SEGMENT for part in pattern):
        # a multi-segment placeholder: compare the literal head and tail only
        head = pattern[:next(i for i, p in enumerate(pattern) if p in _MULTI_SEGMENT)]
        tail_at = max(i for i, p in enumerate(pattern) if p in _MULTI_SEGMENT)
        tail = pattern[tail_at + 1:]
        pairs = list(zip(head, segs)) + list(zip(reversed(tail), reversed(segs)))
    else:
        pairs = list(zip(pattern, segs))
    for part, seg in pairs:
        if _PLACEHOLDER.fullmatch(part) or part == seg:
            continue
        if difflib.SequenceMatcher(None, part, seg).ratio() < 0.6:
            return False
    return True


def _suggest(key: str, declared: list[ConfigKey]) -> str | None:
    candidates: dict[str, None] = {}
    for decl in declared:
        for name in (decl.name, *decl.aliases):
            filled = _fill(name, key)
            if filled != key and _same_shape(name, filled, key):
                candidates.setdefault(filled, None)
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

def _strict_namespace(key: str) -> bool:
    """``systems.<s>.samza.*``, a ``samza.*`` stream property in any spelling, or
    ``metrics.*``: where an unknown key is an error."""
    if key.startswith("metrics.") or stream_prop_of(key) is not None:
        return True
    parts = key.split(".")
    return len(parts) > 3 and parts[0] == "systems" and parts[2] == "samza"


@dataclass(frozen=True)
class ConfigReview:
    """What checking a config found besides errors: keys ignored (``warnings``) and Samza
    keys accepted and not used (``notes``, one per topic)."""

    warnings: list[ConfigWarning]
    notes: list[ConfigNote]


def review_config(config: Config) -> ConfigReview:
    """Parse every set key that has a declaration (a bad value raises ConfigError); return a
    warning for every unknown key under a prefix Weir owns, in key order, and a note per topic
    of Samza keys Weir accepts and does not use. An unknown key of a defined store raises
    ConfigError (see the module docstring); unknown keys in a ``samza.*`` or ``metrics.*``
    namespace raise :class:`UnknownSamzaKeyError`."""
    stores = stores_in(config)
    for store in stores:
        check_store_keys(config, store)
    defined = set(stores)
    stream_props = _stream_prop_declarations()
    declared = declared_keys()
    reporters = set(_listed_reporters(config))
    warnings: list[ConfigWarning] = []
    errors: list[ConfigWarning] = []
    for key in sorted(config):
        decl = _declaration(key, stream_props)
        parts = key.split(".")
        if parts[0] == "stores" and len(parts) > 2 and parts[1] not in defined:
            warnings.append(ConfigWarning(WarningKind.UNDEFINED_STORE, key, config.origin(key),
                                          _suggest_store(parts, stores, decl, declared)))
            continue
        reporter = reporter_key_owner(key)
        if reporter is not None and reporter[0] not in reporters:
            close = difflib.get_close_matches(reporter[0], sorted(reporters), n=1, cutoff=0.6)
            hint = ".".join([*parts[:2], close[0], *parts[3:]]) if close else None
            warnings.append(ConfigWarning(WarningKind.UNLISTED_REPORTER, key,
                                          config.origin(key), hint))
            continue
        if decl is not None:
            decl.parse(config, key)
        elif topic_of(config, key) is not None:
            continue  # a Samza key Weir accepts and does not use: a note, below
        elif _owned(config, key):
            found = ConfigWarning(WarningKind.UNKNOWN_KEY, key, config.origin(key),
                                  _suggest(key, declared))
            (errors if _strict_namespace(key) else warnings).append(found)
    if errors:
        raise UnknownSamzaKeyError(errors)
    return ConfigReview(warnings, samza_notes(config))


def _listed_reporters(config: Config) -> list[str]:
    return METRICS_REPORTERS.get(config)


def check_config(config: Config) -> list[ConfigWarning]:
    """:func:`review_config`'s warnings (the notes left out)."""
    return review_config(config).warnings
