"""Names vulture reports as unused in stores/, recovery/ and engine/ that are used where it cannot
see: by name from config or JSON, by a third-party framework, by users, by a dataclass's
``asdict``. Read by tests/test_lint.py (``vulture ... tests/vulture_whitelist.py``); never
imported. A name here whitelists that name everywhere, so keep the list short and say why.
Anything else vulture finds is dead code: delete it (after a grep of tests/, bench/, examples/
and docs/), do not add it here."""

# ruff: noqa: B018
_ = object()

# -- config keys declared by their declare() call (the binding is the declaration: the key is
#    accepted, documented in docs/CONFIG.md and checked; Samza keys Weir accepts and ignores) --
_.SYSTEM_DEFAULT_STREAM_REPLICATION_FACTOR  # engine/config/samza_keys.py
_.STREAM_DELETE_COMMITTED_MESSAGES  # engine/config/samza_keys.py
_.STREAM_BOUNDED  # engine/config/samza_keys.py
_.STREAM_SYSTEM  # engine/config/streams.py (read through stream_property by key name)
_.STREAM_PHYSICAL_NAME  # engine/config/streams.py

# -- store engines registered by their register_engine() call (stores/engines/registry.py) -----
_.ROCKSDB
_.LMDB
_.MEMORY

# -- enum members parsed by value from config or JSON ----------------------------------------
_.SNAPPY  # stores/engines/_rocksdb_options.py: rocksdb.compression values
_.LZ4HC
_.ZLIB
_.FIFO  # rocksdb.compaction.style
_.STANDBY  # engine/jobmodel/model.py: Samza's job-model container states
_.IN_STAGE  # engine/spark/operator.py: the operator placement option

# -- counters and report fields read with asdict / as_dict, or returned to callers -------------
_.polled  # engine/consumers/watches.py ConsumerCounters (metrics)
_.snapshot_loaded  # engine/spark/partition.py PartitionMetrics (observed metrics)
_.indexed  # engine/systems/filelog/retention.py MaintenanceReport (admin.apply_retention)

# -- called by third-party frameworks ----------------------------------------------------------
_.main_loop  # engine/coordinator/server.py: uvicorn.Server's loop, overridden
_.timeout_keep_alive_task  # engine/coordinator/connections.py: uvicorn cancels this timer
_.disable_wal  # stores/engines/rocksdb.py: a rocksdict WriteOptions setter
_.prepareForTriggerAvailableNow  # engine/spark/logsource.py: PySpark DataSourceStreamReader
_.streamReader  # engine/spark/logsource.py: PySpark DataSource
_.streamWriter
_.overwrite  # its parameter, in PySpark's signature
_.onQueryStarted  # engine/spark/metrics.py: PySpark StreamingQueryListener
_.onQueryProgress
_.onQueryIdle
_.onQueryTerminated
_.exc_type  # recovery/_progress.py: __exit__'s signature

# -- public API for users (documented, or Samza's API that ported tasks call) ----------------
_.close_stream  # filelog admin/producer: Samza's name of end_stream (docs/FILELOG.md)
_.subset  # stores/config.py Config: what tasks read their own keys with (context.config)
_.get_float
_.get_bool
_.get_list
_.flat_map  # engine/app/api.py (docs/APPLICATIONS.md)
_.session_window  # engine/app/windows.py (docs/APPLICATIONS.md)
_.is_first  # engine/app/windows.py: a pane's information for user code, beside index/late

# -- reviewed in wave 9, dead, in a package another engineer owns (left for its owner) -------
