"""One asyncio event loop on its own daemon thread, shared by the tasks of a container.

``async def`` task methods run there: ``process`` coroutines are submitted and complete a
callback when done; other hooks (``init``, ``window``, ``on_end_of_stream``, ``close``) are
awaited by the calling thread. The thread starts on first use, so containers of sync tasks
never create it (nor import asyncio).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

__all__ = ["AsyncioThread"]


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


class AsyncioThread:
    """An asyncio loop running on a daemon thread named ``name``."""

    def __init__(self, name: str = "weir-asyncio"):
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop, started if needed."""
        loop = self._loop
        if loop is None:
            with self._lock:
                if self._loop is None:
                    import asyncio
                    loop = asyncio.new_event_loop()
                    ready = threading.Event()
                    thread = threading.Thread(target=self._run, args=(loop, ready),
                                              name=self.name, daemon=True)
                    thread.start()
                    ready.wait()
                    self._thread, self._loop = thread, loop
                loop = self._loop
        return loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        import asyncio
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    def in_loop_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def submit(self, awaitable: Awaitable[Any]) -> concurrent.futures.Future:
        """Schedule ``awaitable`` on the loop; a concurrent future gives its outcome."""
        import asyncio
        coro = awaitable if asyncio.iscoroutine(awaitable) else _await(awaitable)
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, awaitable: Awaitable[Any], timeout: float | None = None) -> Any:
        """Run ``awaitable`` on the loop and wait for its result (re-raising its error)."""
        if self.in_loop_thread():
            raise RuntimeError("AsyncioThread.run called from its own loop thread; "
                               "await the coroutine instead")
        return self.submit(awaitable).result(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel what still runs on the loop, stop it and join the thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        import asyncio

        async def _cancel_all() -> None:
            current = asyncio.current_task()
            pending = [t for t in asyncio.all_tasks() if t is not current]
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(timeout)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()
