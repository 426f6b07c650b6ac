"""CEL evaluation in a separate process, under a deadline.

The CEL evaluator is native code that holds Python's interpreter lock while it runs and cannot be
interrupted, so an expensive expression evaluated in the server process stalls every request of
that process. Expressions that can be expensive (those with comprehensions, or whose estimated work
is large; see routes/budget.py) are evaluated here instead: in a child process running this module,
which the server kills when the call's CEL deadline passes. The server thread waits on a pipe, so
other requests run meanwhile.

Children are plain `python -m apps_registry.routes.celworker` processes (no Django, no database
connection, no inherited environment), kept in a small per-process pool and reused; one that overruns is
killed and replaced. Messages are length-prefixed pickles over the child's stdin/stdout; both ends
are this module. A request carries the checked program serialized (cel-expr-python's
`Expression.serialize`) with the variables it was checked against, so the child evaluates exactly what
the server compiled, in the same environment (routes/library.py, which the child imports); a plain
source string is compiled in the child with every variable dyn (tests, tools).

A child takes ~0.1 s to start (an interpreter, then the CEL extension). That is not the call's
time: the server starts one child when it starts (`prestart`, from the ASGI lifespan), a child says
when it is ready, and a call's deadline runs from then, never from the child's start.

The child is a resource boundary (time, memory, the interpreter lock), not a security boundary: it
runs as the same user, and the server unpickles its answers. That is sound while the evaluator
itself is memory-safe (CEL has no I/O and the child runs no author code but CEL).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import logging
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apps_registry.routes import library
from apps_registry.routes.library import Declarations, EvaluationError

logger = logging.getLogger(__name__)

_HEADER = struct.Struct("!Q")
_ROOT = Path(__file__).resolve().parents[2]
POOL_SIZE = 4  # idle children kept per server process
MAX_RUNNING = max(2, os.cpu_count() or 2)  # children evaluating at once per server process
QUEUE_SECONDS = 10.0  # how long a call waits for a free slot before failing
START_SECONDS = 10.0  # how long a child may take to start (its own bound: not counted against the call's)
PRESTART = 1  # children started with the server, before any call needs one
WARM = 2  # idle children kept ready after one is killed (it overran or failed), so the next caller need not wait
# An evaluation still running after this long is demoted: its child runs at DEMOTED_NICE from then on, so the
# server's own threads and other calls' short evaluations come first on a busy machine. A process cannot take its
# priority back, so a demoted child stays so: it goes on serving the owners whose evaluations ran long lately
# (SLOW_OWNER_SECONDS), and others get the children that were never demoted while there are any.
DEMOTE_AFTER_SECONDS = 0.05
DEMOTED_NICE = 10
SLOW_OWNER_SECONDS = 60.0
_READY = b"R"  # a child's first byte: started and ready for a request
MEMORY_LIMIT = 2 * 1024**3  # address space of a child, bytes
DEFAULT_MAX_REPLY = 16 * 1024**2  # bytes of an answer the server is willing to read
# The exception classes the evaluator raises, re-raised as themselves in the server.
_ERRORS: dict[str, type[Exception]] = {
    cls.__name__: cls for cls in (EvaluationError, KeyError, TypeError, ValueError, RuntimeError)
}
# What to evaluate: a CEL source (compiled in the child, every variable dyn) or a serialized program
# with its declarations.
Program = str | tuple[bytes, Declarations]


class Deadline(Exception):
    """The evaluation did not finish in time; the child was killed."""


class ShareTaken(Exception):
    """The caller already holds its share of this process's evaluating children (see `share`): refused at once,
    not queued, so one account's calls wait on that account only."""

    def __init__(self, held: int) -> None:
        super().__init__(f"this caller already holds {held} of {MAX_RUNNING} CEL worker processes")
        self.held = held


class WorkerFailed(Exception):
    """The child could not be started or died without an answer."""


class _Child:
    command = (sys.executable, "-m", "apps_registry.routes.celworker")

    def __init__(self, demoted: bool = False) -> None:
        # No inherited environment (no secrets, no database URL): `-m` finds this module from `cwd`.
        env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"}
        self.process = subprocess.Popen(
            list(self.command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=str(_ROOT),
        )
        self.ready = False
        self.demoted = False
        if demoted:  # started demoted: its start-up (an interpreter, the CEL extension) yields the CPU too
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, self.process.pid, DEMOTED_NICE)
                self.demoted = True

    def ready_wait(self) -> None:
        """Wait (up to START_SECONDS) for the child to say it started; WorkerFailed if it does not."""
        if self.ready:
            return
        try:
            signal = self._read(len(_READY), time.monotonic() + START_SECONDS)
        except Deadline:
            raise WorkerFailed(f"the CEL worker process did not start within {START_SECONDS:.0f} s") from None
        if signal != _READY:
            raise WorkerFailed("the CEL worker process started with an unexpected answer")
        self.ready = True

    def call(self, program: Program, context: dict[str, Any], timeout: float, max_reply: int) -> tuple[Any, ...]:
        assert self.process.stdin is not None and self.process.stdout is not None
        body = pickle.dumps((program, context, timeout), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.process.stdin.write(_HEADER.pack(len(body)) + body)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerFailed(f"the CEL worker process is gone ({exc})") from None
        end = time.monotonic() + timeout
        self._demote_unless_answered(min(end, time.monotonic() + DEMOTE_AFTER_SECONDS))
        header = self._read(_HEADER.size, end)
        (size,) = _HEADER.unpack(header)
        if size > max_reply:  # refuse before reading it into the server's memory
            raise WorkerFailed(f"the CEL worker's answer is {size} bytes, over the {max_reply}-byte cap")
        reply: tuple[Any, ...] = pickle.loads(self._read(size, end))
        return reply

    def _demote_unless_answered(self, until: float) -> None:
        assert self.process.stdout is not None
        if select.select([self.process.stdout.fileno()], [], [], max(0.0, until - time.monotonic()))[0]:
            return
        try:
            os.setpriority(os.PRIO_PROCESS, self.process.pid, DEMOTED_NICE)
        except OSError:  # gone already: the read below says so
            return
        self.demoted = True

    def _read(self, size: int, end: float) -> bytes:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        chunks: list[bytes] = []
        remaining = size
        while remaining:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise Deadline()
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                raise WorkerFailed("the CEL worker process ended without an answer")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                # Closing stdin flushes what a dead child never read: a broken pipe, harmless here.
                with contextlib.suppress(OSError):
                    stream.close()


_idle: list[_Child] = []
_lock = threading.Lock()
_running = threading.BoundedSemaphore(MAX_RUNNING)
# Who evaluations are for (an account), and how many children one may hold at once: set by the services around a
# route call or a save's tests (`share`). The children are this process's, so the count is too.
_share: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar("charming_cel_share", default=None)
_held: dict[str, int] = {}
_slow_owners: dict[str, float] = {}  # owner -> when one of their evaluations was last demoted (monotonic)


@contextlib.contextmanager
def share(owner: str, at_most: int) -> Iterator[None]:
    """Evaluations in this block are `owner`'s, who may hold at most `at_most` of the process's MAX_RUNNING
    evaluating children at once (0 or less: no bound); one more is refused with ShareTaken."""
    token = _share.set((owner, at_most))
    try:
        yield
    finally:
        _share.reset(token)


def _share_take() -> str | None:
    current = _share.get()
    if current is None or current[1] <= 0:
        return None
    owner, at_most = current
    with _lock:
        held = _held.get(owner, 0)
        if held >= at_most:
            raise ShareTaken(held)
        _held[owner] = held + 1
    return owner


def _share_give(owner: str | None) -> None:
    if owner is None:
        return
    with _lock:
        left = _held.get(owner, 1) - 1
        if left > 0:
            _held[owner] = left
        else:
            _held.pop(owner, None)


@dataclass(frozen=True)
class Evaluated:
    value: Any
    seconds: float  # the evaluation's own time: from a ready child taking the request to its answer


def evaluate(program: Program, context: dict[str, Any], timeout: float, max_reply: int = DEFAULT_MAX_REPLY) -> Any:
    """The value of a CEL program with `context`, computed in a child process. Raises
    library.EvaluationError on a CEL error, Deadline after `timeout` seconds (the
    child is killed), WorkerFailed if no child could answer (or all were busy for QUEUE_SECONDS, or
    the answer was over `max_reply` bytes)."""
    return evaluate_timed(program, context, timeout, max_reply).value


def evaluate_timed(
    program: Program, context: dict[str, Any], timeout: float, max_reply: int = DEFAULT_MAX_REPLY
) -> Evaluated:
    """`evaluate`, with the time the evaluation took. `timeout` counts from when a child is ready: waiting
    for a free slot (QUEUE_SECONDS) and for a child to start (START_SECONDS) have their own bounds."""
    owner = _share_take()  # ShareTaken: the caller's share is in use; refused before waiting for a slot
    try:
        if not _running.acquire(timeout=QUEUE_SECONDS):
            raise WorkerFailed(f"all {MAX_RUNNING} CEL worker processes stayed busy for {QUEUE_SECONDS:.0f} s")
        try:
            return _evaluate(program, context, timeout, max_reply, owner)
        finally:
            _running.release()
    finally:
        _share_give(owner)


def _take(owner: str | None) -> _Child | None:
    """An idle child for `owner`: a demoted one for an owner whose evaluations ran long lately, else one never
    demoted; the oldest of its kind (the likeliest to be ready: a fresh one may still be starting). For an owner
    not among those when only demoted children are idle, the oldest is killed to make room and None is returned
    (the caller starts one): a demoted child would run its evaluation behind everything else on a busy machine, a
    fresh one starts in about 0.1 s, and demoted children nobody takes do not fill the pool."""
    with _lock:
        if not _idle:
            return None
        now = time.monotonic()
        for name, since in list(_slow_owners.items()):
            if now - since > SLOW_OWNER_SECONDS:
                del _slow_owners[name]
        slow = owner is not None and owner in _slow_owners
        for index, child in enumerate(_idle):
            if child.demoted == slow:
                return _idle.pop(index)
        oldest = _idle.pop(0)
        if slow:
            return oldest
    oldest.kill()
    return None


def _evaluate(
    program: Program, context: dict[str, Any], timeout: float, max_reply: int, owner: str | None
) -> Evaluated:
    child = _take(owner)
    reused = child is not None and child.process.poll() is None
    if child is not None and not reused:
        child.kill()  # died while idle: reap it and close its pipes
    if not reused:
        child = _start()
    assert child is not None
    spent = 0.0
    try:
        child.ready_wait()
        started = time.monotonic()
        try:
            reply = child.call(program, context, timeout, max_reply)
        finally:
            spent = time.monotonic() - started
    except WorkerFailed:
        child.kill()
        if not reused:
            raise
        child = _start()  # an idle child that died since its last use: once more with a fresh one
        try:
            child.ready_wait()
            started = time.monotonic()
            reply = child.call(program, context, max(0.0, timeout - spent), max_reply)
            spent += time.monotonic() - started
        except BaseException:
            _retire(child, owner)
            raise
    except BaseException:
        _retire(child, owner)
        raise
    with _lock:
        if child.demoted and owner is not None:
            _slow_owners[owner] = time.monotonic()
        if len(_idle) < POOL_SIZE:
            _idle.append(child)
            child = None
    if child is not None:
        child.kill()
    if reply[0] == "ok":
        return Evaluated(value=reply[1], seconds=spent)
    error = _ERRORS.get(reply[1], RuntimeError)
    raise error(reply[2])


def _retire(child: _Child, owner: str | None = None) -> None:
    """Kill `child` (it overran or failed) and start one in its place while fewer than WARM are idle:
    killed children must not leave the next caller, often another account's, to wait for one to start. A demoted
    child killed (its evaluation ran to the deadline) makes its owner one whose evaluations run long, and its
    replacement starts demoted, for them: an owner whose every evaluation runs to the deadline takes demoted
    children, and their start-ups, not the never-demoted ones other accounts get."""
    child.kill()
    with _lock:
        if child.demoted and owner is not None:
            _slow_owners[owner] = time.monotonic()
        if len(_idle) >= WARM:
            return
    try:
        fresh = _start(demoted=child.demoted)
    except WorkerFailed:
        return  # the next call tries again, and says so if it fails too
    with _lock:
        if len(_idle) < POOL_SIZE:
            _idle.append(fresh)
            return
    fresh.kill()


def _start(demoted: bool = False) -> _Child:
    try:
        return _Child(demoted)
    except OSError as exc:
        raise WorkerFailed(f"could not start a CEL worker process ({exc})") from None


def prestart(count: int = PRESTART) -> int:
    """Start up to `count` idle children now, so no call waits for one to start; returns how many were
    started. They start in the background (the first call to take one waits for it only if it is not ready
    yet). Called once when the server starts, not at import, so management commands and tests start none."""
    started = 0
    with _lock:
        while len(_idle) < min(count, POOL_SIZE):
            try:
                _idle.append(_start())
            except WorkerFailed as exc:  # the first call will try again, and say so if it fails too
                logger.warning("CEL worker prestart failed: %s", exc)
                break
            started += 1
    return started


def _shutdown() -> None:
    with _lock:
        children = list(_idle)
        _idle.clear()
    for child in children:
        child.kill()


atexit.register(_shutdown)


def _serve() -> None:
    """The child's loop: say it is ready, then read (program, context, timeout), answer ("ok", value) or
    ("error", type, message)."""
    import resource

    # A runaway expression fails (the child dies, the call gets operation_failed) instead of
    # taking the machine's memory.
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    _, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    stdout.write(_READY)
    stdout.flush()
    programs: dict[Program, Any] = {}
    while True:
        header = stdin.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        (size,) = _HEADER.unpack(header)
        program, context, timeout = pickle.loads(stdin.read(size))
        # The server kills a child that overruns; should the server itself die first, the kernel
        # ends the evaluation (SIGXCPU) soon after its deadline instead of letting it spin on.
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu_soft = int(used.ru_utime + used.ru_stime + timeout) + 2
        if cpu_hard == resource.RLIM_INFINITY or cpu_soft < cpu_hard:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_soft, cpu_hard))
        try:
            key = program if isinstance(program, tuple) else (program, tuple(sorted(context)))
            loaded = programs.get(key)
            if loaded is None:
                if len(programs) > 256:
                    programs.clear()
                loaded = programs[key] = _load(program, context)
            reply: tuple[Any, ...] = ("ok", library.evaluate(loaded, context))
            body = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            message = exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) else str(exc)
            body = pickle.dumps(("error", type(exc).__name__, message), protocol=pickle.HIGHEST_PROTOCOL)
        stdout.write(_HEADER.pack(len(body)) + body)
        stdout.flush()


def _load(program: Program, context: dict[str, Any]) -> Any:
    if isinstance(program, tuple):
        serialized, declarations = program
        return library.program_load(serialized, declarations)
    declared = tuple((name, "timestamp" if name == "now" else "dyn") for name in sorted(context))
    return library.compile_program(program, declared, check=False)


if __name__ == "__main__":
    _serve()
