"""Adjunct data stores (docs/ADJUNCT.md): read-only stores filled from an input stream.

* :mod:`~weir.engine.adjunct.settings`: the bindings (``stores.<s>.adstore.input``, broadcast
  or partitioned, bootstrap or not) and ``job.adstore.manager.factory``;
* :mod:`~weir.engine.adjunct.extract`: key/value extractors, projection, rejected keys;
* :mod:`~weir.engine.adjunct.manager`: the per-task :class:`AdjunctDataStoreManager` the task
  instance consults before delivery;
* :mod:`~weir.engine.adjunct.storage`: the container's adjunct stores, decided by the
  recovery table and bootstrapped (bulk path) before any task runs;
* :mod:`~weir.engine.adjunct.seal`: seal markers of versioned bounded datasets.

The files, the recovery table, versions and pins are :mod:`weir.recovery.adjunct`; the keys
are declared in :mod:`weir.stores.adjunct`. See docs/ADJUNCT.md.
"""

from __future__ import annotations

from weir.stores._lazy import lazy_exports

# Loaded on first use: a container reads the adjunct settings of every job, but loads the
# manager and storage only for a job with adjunct stores.
_LAZY = {
    "AdjunctBinding": "weir.engine.adjunct.settings",
    "AdjunctDataStoreManager": "weir.engine.adjunct.manager",
    "AdjunctKeyError": "weir.engine.adjunct.extract",
    "AdjunctSettings": "weir.engine.adjunct.settings",
    "AdjunctStorage": "weir.engine.adjunct.storage",
    "AdjunctTaskStorage": "weir.engine.adjunct.storage",
    "AdjunctValueError": "weir.engine.adjunct.extract",
    "BootstrapStats": "weir.engine.adjunct.storage",
    "EnvelopeExtractor": "weir.engine.adjunct.extract",
    "Feed": "weir.engine.adjunct.manager",
    "JOB_ADSTORE_MANAGER_FACTORY": "weir.engine.adjunct.settings",
    "KeyValueExtractor": "weir.engine.adjunct.extract",
    "Projection": "weir.engine.adjunct.extract",
    "SEAL_KEY": "weir.engine.adjunct.seal",
    "EMPTY_SEAL_KEY": "weir.engine.adjunct.seal",
    "SealKind": "weir.engine.adjunct.seal",
    "seal_kind": "weir.engine.adjunct.extract",
    "SEAL_KEY_BYTES": "weir.engine.adjunct.extract",
    "is_seal": "weir.engine.adjunct.extract",
    "make_extractor": "weir.engine.adjunct.extract",
    "seal_dataset": "weir.engine.adjunct.seal",
    "seal_key_bytes": "weir.engine.adjunct.seal",
}

__all__ = [
    "SEAL_KEY", "EMPTY_SEAL_KEY", "SealKind", "seal_kind", "SEAL_KEY_BYTES",
    "AdjunctKeyError", "AdjunctValueError", "EnvelopeExtractor",
    "KeyValueExtractor", "Projection", "is_seal", "make_extractor",
    "AdjunctDataStoreManager", "Feed",
    "seal_dataset", "seal_key_bytes",
    "JOB_ADSTORE_MANAGER_FACTORY", "AdjunctBinding", "AdjunctSettings",
    "AdjunctStorage", "AdjunctTaskStorage", "BootstrapStats",
]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
