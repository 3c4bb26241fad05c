"""Adjunct data stores (seed design 002): read-only stores filled from an input stream.

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

from weir.engine.adjunct.extract import (SEAL_KEY_BYTES, AdjunctKeyError, AdjunctValueError,
                                         EnvelopeExtractor, KeyValueExtractor, Projection,
                                         is_seal, make_extractor)
from weir.engine.adjunct.manager import AdjunctDataStoreManager, Feed
from weir.engine.adjunct.seal import SEAL_KEY, seal_dataset, seal_key_bytes
from weir.engine.adjunct.settings import (JOB_ADSTORE_MANAGER_FACTORY, AdjunctBinding,
                                          AdjunctSettings)
from weir.engine.adjunct.storage import AdjunctStorage, AdjunctTaskStorage, BootstrapStats

__all__ = [
    "SEAL_KEY", "SEAL_KEY_BYTES", "AdjunctKeyError", "AdjunctValueError", "EnvelopeExtractor",
    "KeyValueExtractor", "Projection", "is_seal", "make_extractor",
    "AdjunctDataStoreManager", "Feed",
    "seal_dataset", "seal_key_bytes",
    "JOB_ADSTORE_MANAGER_FACTORY", "AdjunctBinding", "AdjunctSettings",
    "AdjunctStorage", "AdjunctTaskStorage", "BootstrapStats",
]
