"""The process's threads for sync work off the event loop (MCP's database units, each REST request whole): a pool
that hands each piece of work to the thread that went idle last.

The standard ThreadPoolExecutor's idle threads all wait on one queue, and a new piece wakes whichever the queue's
lock picks, in turn: one client calling again and again meets a different thread each time, whose caches went cold
since. Here one client's calls stay on one warm thread, and more threads wake only when calls overlap:
benchmarks/db_units.py measures a unit of database work (a statement, with its connection from the pool and back)
about a fifth cheaper in CPU one at a time, and the whole MCP call over the network is cheaper at 1 and 8 clients
(docs/performance.md).

Work waits in one queue, in order. A thread that finishes takes the next piece there before it sleeps (as the
standard pool's threads do, so overlapping calls cost no extra wake-ups), and one that finds none waits on its own
inbox (a C `SimpleQueue`) on a stack of idle threads, whose top is woken for new work. A thread takes its next piece,
or goes on the stack, before it hands back the result of the last, so the caller's next call finds it on top. One
lock guards the queue and the stack. At most `max_workers` threads are started, as they are needed, and they live
as long as the pool.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from queue import SimpleQueue
from typing import Any, Literal, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

# A piece of work: the future to settle, the function and its arguments.
_Work = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]
# What an idle thread's inbox carries: LOOK (work may be waiting) or END.
LOOK, END = True, False


class RecentFirstExecutor(Executor):
    """A bounded thread pool whose most recently idle thread takes the next piece of work."""

    def __init__(self, max_workers: int, thread_name_prefix: str = "worker") -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._max_workers = max_workers
        self._prefix = thread_name_prefix
        self._lock = threading.Lock()
        self._waiting: deque[_Work] = deque()  # work not taken yet, in order
        self._idle: list[SimpleQueue[bool]] = []  # idle threads' inboxes, a stack: the last to go idle on top
        self._threads: list[threading.Thread] = []
        self._shut_down = False

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        future: Future[R] = Future()
        with self._lock:
            if self._shut_down:
                raise RuntimeError("cannot schedule new work after shutdown")
            self._waiting.append((future, fn, args, kwargs))
            if self._idle:
                inbox: SimpleQueue[bool] | None = self._idle.pop()
            else:
                inbox = None
                if len(self._threads) < self._max_workers:
                    self._start_thread()
        if inbox is not None:
            inbox.put(LOOK)
        return future

    def _start_thread(self) -> None:
        thread = threading.Thread(
            target=self._serve,
            args=(SimpleQueue(),),
            name=f"{self._prefix}_{len(self._threads)}",
            daemon=True,  # as the server's own threads: a process that exits does not wait for idle ones
        )
        thread.start()
        self._threads.append(thread)

    def _serve(self, inbox: SimpleQueue[bool]) -> None:
        work = self._take(inbox)
        while True:
            if isinstance(work, str):
                # "idle": on the idle stack until woken, then look again (another thread may have taken it first)
                if work == "end" or inbox.get() is END:
                    return
                work = self._take(inbox)
                continue
            future, fn, args, kwargs = work
            del work  # hold nothing of a finished piece while idle
            if not future.set_running_or_notify_cancel():
                work = self._take(inbox)
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # as ThreadPoolExecutor: the caller gets it, the thread goes on
                work = self._take(inbox)
                future.set_exception(exc)
                del exc
            else:
                # The next piece is taken (or this thread is on top of the idle stack) before the caller learns
                # the result: a caller that submits again at once meets this thread, whether it took the
                # work itself or is woken for it.
                work = self._take(inbox)
                future.set_result(result)
                del result
            del future, fn, args, kwargs

    def _take(self, inbox: SimpleQueue[bool]) -> _Work | Literal["idle", "end"]:
        """The next waiting piece of work; else "end" once shut down; else "idle", with `inbox` on the idle stack."""
        with self._lock:
            if self._waiting:
                return self._waiting.popleft()
            if self._shut_down:
                return "end"
            self._idle.append(inbox)
            return "idle"

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new work; idle threads end at once, busy ones once no work is waiting (the waiting work is cancelled
        instead, with `cancel_futures`); with `wait`, return once every thread has ended."""
        with self._lock:
            self._shut_down = True
            if cancel_futures:
                while self._waiting:
                    self._waiting.popleft()[0].cancel()
            idle, self._idle = self._idle, []
            threads = list(self._threads)
        for inbox in idle:
            inbox.put(END)
        if wait:
            for thread in threads:
                thread.join()
