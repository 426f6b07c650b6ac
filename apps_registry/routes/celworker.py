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
import logging
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
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


class WorkerFailed(Exception):
    """The child could not be started or died without an answer."""


class _Child:
    command = (sys.executable, "-m", "apps_registry.routes.celworker")

    def __init__(self) -> None:
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
        header = self._read(_HEADER.size, end)
        (size,) = _HEADER.unpack(header)
        if size > max_reply:  # refuse before reading it into the server's memory
            raise WorkerFailed(f"the CEL worker's answer is {size} bytes, over the {max_reply}-byte cap")
        reply: tuple[Any, ...] = pickle.loads(self._read(size, end))
        return reply

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
    if not _running.acquire(timeout=QUEUE_SECONDS):
        raise WorkerFailed(f"all {MAX_RUNNING} CEL worker processes stayed busy for {QUEUE_SECONDS:.0f} s")
    try:
        return _evaluate(program, context, timeout, max_reply)
    finally:
        _running.release()


def _evaluate(program: Program, context: dict[str, Any], timeout: float, max_reply: int) -> Evaluated:
    with _lock:
        child = _idle.pop() if _idle else None
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
            child.kill()
            raise
    except BaseException:
        child.kill()
        raise
    with _lock:
        if len(_idle) < POOL_SIZE:
            _idle.append(child)
            child = None
    if child is not None:
        child.kill()
    if reply[0] == "ok":
        return Evaluated(value=reply[1], seconds=spent)
    error = _ERRORS.get(reply[1], RuntimeError)
    raise error(reply[2])


def _start() -> _Child:
    try:
        return _Child()
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
