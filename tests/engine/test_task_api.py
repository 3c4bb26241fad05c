"""The task API: shapes, wrappers and loading tasks from config."""

from __future__ import annotations

import pytest

from weir.engine.task import (AsyncStreamTask, RequestScope, ShutdownScope, StreamTask, TaskKind,
                         TaskWrapper, WindowableTask, describe_task, load_object,
                         load_task_factory)
from weir.stores.config import Config
from weir.stores.errors import ConfigError


class Upper(StreamTask):
    def process(self, envelope, collector, coordinator):
        return envelope.message.upper()


class Windowed(StreamTask, WindowableTask):
    def __init__(self):
        self.windows = 0

    def process(self, envelope, collector, coordinator):
        return None

    def window(self, collector, coordinator):
        self.windows += 1


class CallbackTask(AsyncStreamTask):
    def process_async(self, envelope, collector, coordinator, callback):
        callback.complete()


class CoroutineTask(AsyncStreamTask):
    async def process(self, envelope, collector, coordinator):
        return None


class DuckTask:
    """No base class: the shape is found by method names."""

    def process(self, envelope, collector, coordinator):
        return None

    def on_end_of_stream(self, collector, coordinator):
        return None

    def close(self):
        return None


class Recorder(TaskWrapper):
    """Sees every call and delegates."""

    calls: list[str] = []

    def process(self, envelope, collector, coordinator):
        Recorder.calls.append(f"{type(self).__name__}.process")
        return self.wrapped.process(envelope, collector, coordinator)

    def window(self, collector, coordinator):
        Recorder.calls.append(f"{type(self).__name__}.window")
        return self.wrapped.window(collector, coordinator)


class Outer(Recorder):
    pass


class Inner(Recorder):
    pass


def make_windowed():
    return Windowed()


class _Env:
    message = "abc"


def test_sync_task_shape_lists_its_capabilities():
    shape = describe_task(Windowed())
    assert shape.kind is TaskKind.SYNC
    assert shape.windowable and not shape.initable and not shape.closable
    assert not shape.end_of_stream_listener


def test_callback_and_coroutine_tasks_are_told_apart():
    assert describe_task(CallbackTask()).kind is TaskKind.CALLBACK
    assert describe_task(CoroutineTask()).kind is TaskKind.COROUTINE


def test_duck_typed_task_needs_no_base_class():
    shape = describe_task(DuckTask())
    assert shape.kind is TaskKind.SYNC
    assert shape.end_of_stream_listener and shape.closable and not shape.windowable


def test_object_without_process_is_not_a_task():
    with pytest.raises(TypeError, match="neither process"):
        describe_task(object())
    with pytest.raises(TypeError, match="neither process"):
        describe_task(AsyncStreamTask())


def test_wrapper_has_the_shape_of_the_task_it_wraps():
    assert describe_task(TaskWrapper(CoroutineTask())).kind is TaskKind.COROUTINE
    assert describe_task(TaskWrapper(CallbackTask())).kind is TaskKind.CALLBACK
    shape = describe_task(TaskWrapper(TaskWrapper(Windowed())))
    assert shape.kind is TaskKind.SYNC and shape.windowable
    assert not describe_task(TaskWrapper(Upper())).windowable


def test_base_wrapper_delegates_every_call():
    inner = Windowed()
    wrapped = TaskWrapper(inner)
    assert TaskWrapper(Upper()).process(_Env(), None, None) == "ABC"
    wrapped.window(None, None)
    assert inner.windows == 1
    assert wrapped.init(None) is None and wrapped.close() is None  # absent hooks: no-ops


def test_task_class_loads_module_colon_class_and_dotted_names():
    make = load_task_factory(Config({"task.class": "tests.engine.test_task_api:Upper"}))
    first, second = make(), make()
    assert isinstance(first, Upper) and first is not second
    make = load_task_factory({"task.class": "tests.engine.test_task_api.make_windowed"})
    assert isinstance(make(), Windowed)


def test_wrappers_are_applied_first_listed_outermost_and_see_every_call():
    Recorder.calls.clear()
    make = load_task_factory({
        "task.class": "tests.engine.test_task_api:Windowed",
        "task.wrapper.class": "tests.engine.test_task_api:Outer, tests.engine.test_task_api:Inner"})
    task = make()
    assert isinstance(task, Outer) and isinstance(task.wrapped, Inner)
    assert isinstance(task.wrapped.wrapped, Windowed)
    task.process(_Env(), None, None)
    task.window(None, None)
    assert Recorder.calls == ["Outer.process", "Inner.process", "Outer.window", "Inner.window"]
    assert task.wrapped.wrapped.windows == 1


def test_missing_task_class_names_the_key():
    with pytest.raises(ConfigError, match="task.class"):
        load_task_factory({})


def test_unimportable_task_class_names_the_key_and_origin():
    cfg = Config({"task.class": "no_such_module_xyz:Task"}, origins={"task.class": "job.properties:4"})
    with pytest.raises(ConfigError) as info:
        load_task_factory(cfg)
    message = str(info.value)
    assert "task.class" in message and "job.properties:4" in message
    assert "no_such_module_xyz" in message


def test_missing_attribute_is_a_config_error():
    with pytest.raises(ConfigError, match="has no attribute 'Nope'"):
        load_object("tests.engine.test_task_api:Nope", key="task.class")


def test_a_wrapper_named_as_the_task_is_rejected():
    with pytest.raises(ConfigError, match="task wrapper, not a task"):
        load_task_factory({"task.class": "tests.engine.test_task_api:Outer"})


def test_a_factory_returning_a_non_task_fails_when_building():
    make = load_task_factory({"task.class": "builtins:object"})
    with pytest.raises(TypeError, match="not a task"):
        make()


def test_shutdown_scope_is_the_request_scope():
    assert ShutdownScope is RequestScope
    assert {s.name for s in ShutdownScope} == {"CURRENT_TASK", "ALL_TASKS_IN_CONTAINER"}
