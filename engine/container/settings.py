"""Everything a container runs with, parsed once from the job config: :class:`JobSettings`.

Config is parsed at the edge: the runner (``weir run``) and each container process build one
:class:`JobSettings` from the job's config and hand each component its own frozen settings
object -- the run loop its :class:`~weir.engine.runloop.settings.RunLoopConfig`, the
consumers their :class:`~weir.engine.consumers.consumers.ConsumerSettings`, each task
instance the ``task.ignored.exceptions`` policy, the stores their
:class:`~weir.stores.spec.StoreSpec`, the chooser its
:class:`~weir.engine.chooser.spec.ChooserSpec`, the control plane its
:class:`~weir.engine.control.settings.ControlSettings`, the consumers' start its offset policies,
the container's storage manager its :class:`~weir.recovery.container_storage.RestoreSettings`,
its checkpoints their :class:`~weir.engine.container.checkpoints.CheckpointSettings`, the
adjunct stores their :class:`~weir.engine.adjunct.settings.AdjunctSettings`. No
component re-reads the raw config for its own keys. Building it is also the proof that the
whole job parses: :func:`~weir.engine.container.preflight.check_job` builds it (and checks the
directories) before anything is created.

Example::

    >>> from weir.stores.config import Config
    >>> from weir.engine.systems.registry import SystemRegistry
    >>> config = Config({"job.name": "wc", "task.class": "x:Y", "task.inputs": "memory.words",
    ...                  "task.max.concurrency": "4", "job.container.thread.pool.size": "2"})
    >>> settings = JobSettings.from_config(config, SystemRegistry(config))
    >>> settings.run_loop.max_concurrency, settings.consumers.poll_interval_ms
    (4, 50)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from weir.recovery.container_storage import RestoreSettings
from weir.stores.budget import MemoryBudget
from weir.stores.config import Config
from weir.stores.errors import ConfigError
from weir.stores.serdes import serde_from_name
from weir.stores.spec import STORE_KEY_SERDE, STORE_MSG_SERDE, StoreSpec, stores_in

from weir.engine.adjunct.settings import AdjunctSettings
from weir.engine.chooser.spec import ChooserSpec
from weir.engine.container.checkpoints import CheckpointKind, CheckpointSettings
from weir.engine.config.job import JobConfig
from weir.engine.config.streams import JOB_DEFAULT_SYSTEM, all_input_streams
from weir.engine.consumers.consumers import ConsumerSettings
from weir.engine.consumers.offsets import OffsetPolicy, offset_policy
from weir.engine.container.exactly_once import ProcessingGuarantee, processing_guarantee
from weir.engine.control.settings import ControlSettings
from weir.engine.jobmodel.frozen import FrozenMap
from weir.engine.metrics import MetricsSettings
from weir.engine.model import SystemStream
from weir.engine.runloop.failures import IgnoredExceptions
from weir.engine.runloop.settings import RunLoopConfig
from weir.engine.systems.registry import SystemRegistry

__all__ = ["JobSettings", "changelog_admin"]


@dataclass(frozen=True)
class JobSettings:
    """Every settings object of one job, parsed once from its config."""

    job: JobConfig
    run_loop: RunLoopConfig
    ignored: IgnoredExceptions
    metrics: MetricsSettings
    consumers: ConsumerSettings
    stores: tuple[StoreSpec, ...]
    chooser: ChooserSpec
    control: ControlSettings
    offsets: Mapping[SystemStream, OffsetPolicy] = field(default_factory=dict)
    """The offset policy (``samza.offset.default``, ``samza.reset.offset``) of every input."""
    systems: tuple[str, ...] = ()
    """The systems a container makes producers (and consumers) for."""
    restore: RestoreSettings = field(default_factory=RestoreSettings)
    """How the container restores its stores (``job.container.restore.*``)."""
    checkpoints: CheckpointSettings | None = None
    """Which checkpoint manager the job uses (``task.checkpoint.factory`` / ``.system``);
    None only for settings built in code (then: files in ``task.checkpoint.path``)."""
    adjuncts: AdjunctSettings = field(default_factory=AdjunctSettings)
    """The adjunct stores' bindings (``stores.<s>.adstore.*``, ``job.adstore.*``)."""
    guarantee: ProcessingGuarantee = ProcessingGuarantee.AT_LEAST_ONCE
    """``task.processing.guarantee`` (exactly-once: docs/EXACTLY-ONCE.md)."""
    memory: MemoryBudget = field(default_factory=MemoryBudget)
    """``job.container.memory.mb`` and the stores' explicit sizes: each container sizes its
    stores from it (:meth:`MemoryBudget.size`) once it knows its task count."""

    @classmethod
    def from_config(cls, config: Config, registry: SystemRegistry, *,
                    job: JobConfig | None = None) -> "JobSettings":
        """Parse every setting of the job; raise ConfigError (naming the key and where it was
        set) for the first bad one. Creates nothing: systems' admins are built (they parse
        their settings) but no stream, file or directory is made."""
        job = job if job is not None else JobConfig.from_config(config)
        run_loop = RunLoopConfig.from_config(config)
        ignored = IgnoredExceptions.from_config(config)
        metrics = MetricsSettings.from_config(config)
        consumers = ConsumerSettings.from_config(config)
        specs = tuple(StoreSpec.from_config(config, name, changelog_system=job.changelog_system)
                      for name in stores_in(config))
        for spec in specs:
            serde_from_name(spec.key_serde, config, key=STORE_KEY_SERDE.key(store=spec.name))
            serde_from_name(spec.value_serde, config, key=STORE_MSG_SERDE.key(store=spec.name))
        chooser = ChooserSpec.from_config(config)
        control = ControlSettings.from_config(config, checkpoint_dir=job.checkpoint_dir)
        inputs = all_input_streams(config)
        for spec in specs:
            if spec.logged:
                changelog_admin(registry, spec)  # names stores.<s>.changelog when unusable
        systems = _systems(config, registry, inputs, specs)
        for system in systems:
            registry.admin(system)  # resolves the factory and parses the system's settings
        for ss in sorted(set(inputs) | set(_configured_streams(config, systems))):
            registry.serdes.for_stream(ss)
        offsets = FrozenMap({ss: offset_policy(config, ss) for ss in inputs})
        restore = RestoreSettings.from_config(config)
        adjuncts = AdjunctSettings.from_config(config, specs)
        checkpoints = CheckpointSettings.from_config(config, job)
        if checkpoints.system is not None:
            try:
                registry.admin(checkpoints.system)
            except ConfigError as exc:
                raise ConfigError(
                    f"the checkpoint stream's system '{checkpoints.system}' cannot be used "
                    f"({exc}); configure systems.{checkpoints.system}.factory or name a "
                    f"configured system", key="task.checkpoint.system",
                    origin=config.origin("task.checkpoint.system")) from None
            if checkpoints.system not in systems:
                systems = sorted({*systems, checkpoints.system})
        memory = MemoryBudget.from_config(config, [spec.name for spec in specs])
        guarantee = processing_guarantee(config, registry, specs)
        if guarantee is ProcessingGuarantee.EXACTLY_ONCE \
                and checkpoints.kind is not CheckpointKind.FILE:
            # The checkpoint is the transaction's decision record, found by its file path by
            # whoever completes an abandoned transaction (docs/EXACTLY-ONCE.md section 4).
            raise ConfigError(
                "task.processing.guarantee=exactly_once needs checkpoint files (the checkpoint "
                "file is each transaction's decision record); checkpoints in a stream "
                f"(task.checkpoint.factory={checkpoints.kind.value}) are not supported with it "
                "yet: remove task.checkpoint.factory, or set "
                "task.processing.guarantee=at_least_once", key="task.checkpoint.factory",
                origin=config.origin("task.checkpoint.factory"))
        if guarantee is ProcessingGuarantee.EXACTLY_ONCE:
            run_loop = run_loop.for_exactly_once(config)
        return cls(job, run_loop, ignored, metrics, consumers, specs, chooser, control, offsets,
                   tuple(systems), restore, checkpoints, adjuncts, guarantee, memory)

    @property
    def checkpoint_settings(self) -> CheckpointSettings:
        """The checkpoint settings (files in ``task.checkpoint.path`` when none were parsed)."""
        if self.checkpoints is not None:
            return self.checkpoints
        from weir.engine.container.checkpoints import CheckpointKind, checkpoint_stream_name
        return CheckpointSettings(CheckpointKind.FILE, None,
                                  checkpoint_stream_name(self.job.name, self.job.id))

    def offset_policy(self, ss: SystemStream, config: Config) -> OffsetPolicy:
        """The policy of ``ss``: parsed already for inputs, else from ``config``."""
        policy = self.offsets.get(ss)
        return policy if policy is not None else offset_policy(config, ss)


def changelog_admin(registry: SystemRegistry, spec: StoreSpec):
    """The admin of the system holding ``spec``'s changelog; a system that cannot be used is a
    ConfigError naming ``stores.<s>.changelog`` and where it was set (the key to fix)."""
    system, stream = spec.changelog
    key = f"stores.{spec.name}.changelog"
    try:
        return registry.admin(system)
    except ConfigError as exc:
        raise ConfigError(
            f"the changelog '{system}.{stream}' of store '{spec.name}' is on system "
            f"'{system}', which cannot be used ({exc}); configure "
            f"systems.{system}.factory, or point the store's changelog at a configured "
            f"system ({', '.join(registry.systems()) or 'none configured'})",
            key=key, origin=registry.config.origin(key)) from None



def _systems(config: Config, registry: SystemRegistry, inputs: Iterable[SystemStream],
             specs: Iterable[StoreSpec]) -> list[str]:
    """The systems a container makes producers (and consumers) for."""
    systems = set(registry.systems())
    systems.update(ss.system for ss in inputs)
    systems.update(spec.changelog[0] for spec in specs if spec.logged)
    default = JOB_DEFAULT_SYSTEM.get(config)
    if default:
        systems.add(default)
    return sorted(systems)



def _configured_streams(config: Config, systems: Iterable[str]) -> list[SystemStream]:
    """Streams named by ``systems.<system>.streams.<stream>.*`` keys (their serdes are
    resolved from config before anything runs)."""
    out = set()
    for system in systems:
        prefix = f"systems.{system}.streams."
        for key in config:
            if key.startswith(prefix):
                stream = key[len(prefix):].split(".", 1)[0]
                if stream:
                    out.add(SystemStream(system, stream))
    return sorted(out)
