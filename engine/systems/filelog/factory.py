"""``FileLogSystemFactory``: the ``filelog`` system (``systems.<name>.factory=filelog``).

Example::

    >>> import tempfile
    >>> factory = FileLogSystemFactory()
    >>> config = {"systems.filelog.root": tempfile.mkdtemp()}
    >>> admin = factory.get_admin("filelog", config)
    >>> admin.create_stream(StreamSpec("clicks", 1))
    True
"""

from __future__ import annotations

from collections.abc import Mapping

from weir.engine.systems.api import StreamSpec, SystemFactoryBase  # noqa: F401  (StreamSpec: the example)
from weir.engine.systems.filelog.admin import FileLogAdmin
from weir.engine.systems.filelog.consumer import FileLogConsumer
from weir.engine.systems.filelog.producer import FileLogProducer
from weir.engine.systems.filelog.settings import FileLogSettings

__all__ = ["FileLogSystemFactory"]


class FileLogSystemFactory(SystemFactoryBase):
    """Makes the admin, consumer and producer of a file log system from its config."""

    def get_admin(self, system: str, config: Mapping[str, str]) -> FileLogAdmin:
        return FileLogAdmin(FileLogSettings.from_config(system, config))

    def get_consumer(self, system: str, config: Mapping[str, str]) -> FileLogConsumer:
        return FileLogConsumer(FileLogSettings.from_config(system, config))

    def get_producer(self, system: str, config: Mapping[str, str]) -> FileLogProducer:
        return FileLogProducer(FileLogSettings.from_config(system, config))
