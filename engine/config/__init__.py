"""Job configuration: files (.properties, YAML), overrides, checks, generated docs, and the
job-level keys (job, streams, serdes).

``weir.stores.config`` holds the primitives (``Config``, ``declare``, ``ConfigError``) because
``stores`` parses its own keys and may not import ``engine``; this package loads files and
declares the keys that belong to the engine.
"""

from weir.engine.config.check import (ConfigReview, ConfigWarning, UnknownSamzaKeyError,
                                     WarningKind, check_config)
from weir.engine.config.samza_keys import ConfigNote, SamzaTopic
from weir.engine.config.job import (
    JobConfig,
    StoreBase,
    apply_overrides,
    config_docs_markdown,
    load_all_declarations,
    load_every_declaration,
    load_config,
    load_declarations_for,
    parse_override,
    review_config,
    validate_config,
    warn_unknown_keys,
)
from weir.engine.config.serdes import SerdeManager, StreamSerdes, stream_serdes
from weir.engine.config.streams import (
    all_input_streams,
    broadcast_inputs,
    job_inputs,
    stream_id_for,
    stream_property,
)

__all__ = [
    "ConfigWarning", "UnknownSamzaKeyError", "WarningKind", "check_config",
    "ConfigReview", "ConfigNote", "SamzaTopic", "review_config",
    "JobConfig", "StoreBase", "apply_overrides", "config_docs_markdown",
    "load_all_declarations", "load_every_declaration", "load_config", "load_declarations_for",
    "parse_override",
    "validate_config",
    "warn_unknown_keys",
    "SerdeManager", "StreamSerdes", "stream_serdes",
    "all_input_streams", "broadcast_inputs", "job_inputs", "stream_id_for", "stream_property",
]
