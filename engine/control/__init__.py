"""Control messages through intermediate streams (docs/CONTROL.md).

* :mod:`~weir.engine.control.messages`: watermark, end-of-stream and drain messages;
* :mod:`~weir.engine.control.serde`: the in-band wire format (type byte + JSON);
* :mod:`~weir.engine.control.states`: end-of-stream and watermark reconciliation per partition;
* :mod:`~weir.engine.control.sources`: watermarks of source partitions (bounded
  out-of-orderness, idle partitions);
* :mod:`~weir.engine.control.sender`: sending control messages down intermediate streams;
* :mod:`~weir.engine.control.task_control`: one task's bookkeeping, checkpointed;
* :mod:`~weir.engine.control.plane`: which tasks of a container get it;
* :mod:`~weir.engine.control.drain`: drain requests and the monitor;
* :mod:`~weir.engine.control.settings`: the config keys.

docs/CONTROL.md is the guide. Every name loads on first use: a job that only reads
:mod:`~weir.engine.control.settings` (every job does) does not import the rest.
"""

from weir.stores._lazy import lazy_exports

_LAZY = {
    "DrainMonitor": "weir.engine.control.drain",
    "DrainProgress": "weir.engine.control.drain",
    "DrainRequest": "weir.engine.control.drain",
    "DrainStart": "weir.engine.control.drain",
    "RunTarget": "weir.engine.control.drain",
    "drain_path_of": "weir.engine.control.drain",
    "drain_progress": "weir.engine.control.drain",
    "read_drain_request": "weir.engine.control.drain",
    "request_drain": "weir.engine.control.drain",
    "running_runs": "weir.engine.control.drain",
    "settle_drain_request": "weir.engine.control.drain",
    "write_drain_request": "weir.engine.control.drain",
    "BadTaskCountError": "weir.engine.control.errors",
    "ControlMessageError": "weir.engine.control.errors",
    "DrainRequestError": "weir.engine.control.errors",
    "JobNotRunningError": "weir.engine.control.errors",
    "MalformedControlMessageError": "weir.engine.control.errors",
    "UnknownControlVersionError": "weir.engine.control.errors",
    "UnknownMessageTypeError": "weir.engine.control.errors",
    "CONTROL_VERSION": "weir.engine.control.messages",
    "WATERMARK_MAX": "weir.engine.control.messages",
    "WATERMARK_NOT_EXIST": "weir.engine.control.messages",
    "ControlMessage": "weir.engine.control.messages",
    "DrainMessage": "weir.engine.control.messages",
    "EndOfStreamMessage": "weir.engine.control.messages",
    "MessageType": "weir.engine.control.messages",
    "WatermarkMessage": "weir.engine.control.messages",
    "WatermarkStatus": "weir.engine.control.messages",
    "WatermarkStatusMessage": "weir.engine.control.messages",
    "ControlPlane": "weir.engine.control.plane",
    "ControlMessageSender": "weir.engine.control.sender",
    "IntermediateStreamSerdes": "weir.engine.control.serde",
    "decode_control": "weir.engine.control.serde",
    "encode_control": "weir.engine.control.serde",
    "ControlSettings": "weir.engine.control.settings",
    "is_intermediate": "weir.engine.control.settings",
    "upstream_task_count": "weir.engine.control.settings",
    "PartitionClock": "weir.engine.control.sources",
    "SourceWatermarks": "weir.engine.control.sources",
    "EndOfStreamCheckpoint": "weir.engine.control.states",
    "EndOfStreamStates": "weir.engine.control.states",
    "WatermarkCheckpoint": "weir.engine.control.states",
    "WatermarkStates": "weir.engine.control.states",
    "CHECKPOINT_KEY": "weir.engine.control.task_control",
    "ControlOutcome": "weir.engine.control.task_control",
    "TaskControl": "weir.engine.control.task_control",
}

__all__ = [
    "DrainMonitor", "DrainProgress", "DrainRequest", "DrainStart", "RunTarget", "drain_path_of",
    "drain_progress", "read_drain_request", "request_drain", "running_runs",
    "settle_drain_request", "write_drain_request",
    "BadTaskCountError", "ControlMessageError", "DrainRequestError", "JobNotRunningError",
    "MalformedControlMessageError", "UnknownControlVersionError", "UnknownMessageTypeError",
    "CONTROL_VERSION", "WATERMARK_MAX", "WATERMARK_NOT_EXIST", "ControlMessage",
    "DrainMessage", "EndOfStreamMessage", "MessageType", "WatermarkMessage", "WatermarkStatus",
    "WatermarkStatusMessage",
    "ControlPlane", "ControlMessageSender",
    "IntermediateStreamSerdes", "decode_control", "encode_control",
    "ControlSettings", "is_intermediate", "upstream_task_count",
    "PartitionClock", "SourceWatermarks",
    "EndOfStreamCheckpoint", "EndOfStreamStates", "WatermarkCheckpoint", "WatermarkStates",
    "CHECKPOINT_KEY", "ControlOutcome", "TaskControl",
]

__getattr__ = lazy_exports(__name__, _LAZY, globals())
