"""The pool of threads for database work (charming/threads.py): bounded, in order, the most recently idle thread
first, and an Executor as asyncio's run_in_executor and the standard library expect."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import CancelledError, ThreadPoolExecutor

import pytest

from charming.threads import RecentFirstExecutor

WAIT = 10  # seconds before a test gives up on a thread: only reached when the pool is broken


@pytest.fixture
def pool() -> Iterator[RecentFirstExecutor]:
    executor = RecentFirstExecutor(max_workers=3, thread_name_prefix="test-pool")
    yield executor
    executor.shutdown(wait=True, cancel_futures=True)


def _held(gate: threading.Event, started: threading.Semaphore) -> str:
    started.release()
    assert gate.wait(WAIT)
    return threading.current_thread().name


def _busy(pool: RecentFirstExecutor, count: int) -> tuple[threading.Event, list]:
    """`count` pieces of work running at once, each holding its thread until the gate opens."""
    gate, started = threading.Event(), threading.Semaphore(0)
    futures = [pool.submit(_held, gate, started) for _ in range(count)]
    for _ in range(count):
        assert started.acquire(timeout=WAIT)
    return gate, futures


def test_results_and_errors_come_back_through_the_futures(pool):
    assert pool.submit(lambda a, b=0: a + b, 2, b=3).result(WAIT) == 5

    def fails() -> None:
        raise ValueError("the unit failed")

    with pytest.raises(ValueError, match="the unit failed"):
        pool.submit(fails).result(WAIT)
    assert pool.submit(lambda: "the thread goes on").result(WAIT) == "the thread goes on"


def test_no_more_threads_than_its_bound_and_work_beyond_them_waits(pool):
    gate, running = _busy(pool, 3)
    waiting = [pool.submit(lambda n=n: n) for n in range(5)]

    assert not any(future.done() for future in waiting)
    assert len(pool._threads) == 3
    gate.set()
    assert [future.result(WAIT) for future in waiting] == [0, 1, 2, 3, 4]
    assert len({future.result(WAIT) for future in running}) == 3  # three threads, each its own name
    assert len(pool._threads) == 3


def test_waiting_work_runs_in_the_order_it_came():
    executor = RecentFirstExecutor(max_workers=1)
    gate, running = _busy(executor, 1)
    finished: list[int] = []
    waiting = [executor.submit(finished.append, n) for n in range(20)]
    gate.set()
    for future in running + waiting:
        future.result(WAIT)
    executor.shutdown()

    assert finished == list(range(20))


def test_the_thread_that_went_idle_last_takes_the_next_piece_of_work(pool):
    gate, running = _busy(pool, 3)  # three threads exist
    gate.set()
    for future in running:
        future.result(WAIT)
    last = pool.submit(threading.current_thread).result(WAIT)

    # One piece at a time: every one meets the thread that just went idle, never a colder one.
    assert {pool.submit(threading.current_thread).result(WAIT) for _ in range(30)} == {last}


def test_the_standard_pool_would_rotate_its_threads():
    """What the test above tells apart: the standard pool hands serial work to its idle threads in turn."""
    with ThreadPoolExecutor(max_workers=3) as standard:
        gate, started = threading.Event(), threading.Semaphore(0)
        running = [standard.submit(_held, gate, started) for _ in range(3)]
        for _ in range(3):
            assert started.acquire(timeout=WAIT)
        gate.set()
        for future in running:
            future.result(WAIT)
        seen = {standard.submit(threading.current_thread).result(WAIT) for _ in range(30)}
    assert len(seen) > 1


def test_overlapping_work_is_all_done_by_the_bounded_threads(pool):
    results = [pool.submit(lambda n=n: n * n) for n in range(500)]

    assert [future.result(WAIT) for future in results] == [n * n for n in range(500)]
    assert 1 <= len(pool._threads) <= 3
    assert all(thread.name.startswith("test-pool_") for thread in pool._threads)


def test_work_cancelled_while_it_waits_never_runs(pool):
    gate, running = _busy(pool, 3)
    ran: list[str] = []
    cancelled = pool.submit(ran.append, "cancelled")
    kept = pool.submit(ran.append, "kept")

    assert cancelled.cancel()
    gate.set()
    kept.result(WAIT)
    with pytest.raises(CancelledError):
        cancelled.result(WAIT)
    assert ran == ["kept"]


def test_shutdown_ends_the_threads_refuses_new_work_and_can_cancel_what_waits():
    executor = RecentFirstExecutor(max_workers=2, thread_name_prefix="test-pool")
    gate, running = _busy(executor, 2)
    waiting = executor.submit(lambda: "never")
    stopper = threading.Thread(target=executor.shutdown, kwargs={"wait": True, "cancel_futures": True})
    stopper.start()

    stopper.join(0.2)
    assert stopper.is_alive()  # waits for the busy threads
    with pytest.raises(RuntimeError, match="after shutdown"):
        executor.submit(lambda: None)
    gate.set()
    stopper.join(WAIT)
    assert not stopper.is_alive()
    assert waiting.cancelled()
    assert sorted(future.result(WAIT) for future in running) == ["test-pool_0", "test-pool_1"]
    assert not any(thread.is_alive() for thread in executor._threads)


def test_shutdown_runs_the_waiting_work_first_unless_cancelled():
    executor = RecentFirstExecutor(max_workers=1)
    gate, running = _busy(executor, 1)
    waiting = executor.submit(lambda: "ran")
    stopper = threading.Thread(target=executor.shutdown)
    stopper.start()
    gate.set()
    stopper.join(WAIT)

    assert waiting.result(WAIT) == "ran"
    assert not any(thread.is_alive() for thread in executor._threads)


def test_asyncio_runs_units_on_it_with_the_callers_context(pool):
    import contextvars

    caller = contextvars.ContextVar("caller", default=None)

    async def main() -> list[str | None]:
        caller.set("alice")
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        return list(await asyncio.gather(*(loop.run_in_executor(pool, context.run, caller.get) for _ in range(10))))

    assert asyncio.run(main()) == ["alice"] * 10


def test_it_needs_at_least_one_thread():
    with pytest.raises(ValueError, match="at least 1"):
        RecentFirstExecutor(max_workers=0)
