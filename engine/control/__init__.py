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

docs/CONTROL.md is the guide.
"""

from weir.engine.control.drain import (DrainMonitor, DrainProgress, DrainRequest, DrainStart,
                                       RunTarget, drain_path_of, drain_progress,
                                       read_drain_request, request_drain, running_runs,
                                       settle_drain_request, write_drain_request)
from weir.engine.control.errors import (BadTaskCountError, ControlMessageError, DrainRequestError,
                                        JobNotRunningError, MalformedControlMessageError,
                                        UnknownControlVersionError, UnknownMessageTypeError)
from weir.engine.control.messages import (CONTROL_VERSION, WATERMARK_MAX, WATERMARK_NOT_EXIST,
                                          ControlMessage, DrainMessage, EndOfStreamMessage,
                                          MessageType, WatermarkMessage, WatermarkStatus,
                                          WatermarkStatusMessage)
from weir.engine.control.plane import ControlPlane
from weir.engine.control.sender import ControlMessageSender
from weir.engine.control.serde import IntermediateStreamSerdes, decode_control, encode_control
from weir.engine.control.settings import ControlSettings, is_intermediate, upstream_task_count
from weir.engine.control.sources import PartitionClock, SourceWatermarks
from weir.engine.control.states import (EndOfStreamCheckpoint, EndOfStreamStates,
                                        WatermarkCheckpoint, WatermarkStates)
from weir.engine.control.task_control import CHECKPOINT_KEY, ControlOutcome, TaskControl

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
