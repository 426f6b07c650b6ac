"""Per-request latency and server CPU on a kept-alive connection: event loop, HTTP parser, one worker or several.

    .venv/bin/python benchmarks/keepalive.py                 # 3 rounds x 200 GETs per configuration and client mode
    .venv/bin/python benchmarks/keepalive.py --requests 500 --rounds 5 --only "2 workers"
    .venv/bin/python benchmarks/keepalive.py --path /.well-known/oauth-protected-resource/mcp

For each configuration it starts `uvicorn charming.asgi:application` on a fresh port (temporary
SQLite database, the trivial GET needs none), warms it up with 20 requests on new connections and
waits until its processes are idle, then opens ONE HTTP/1.1 connection with http.client and sends
the GETs one after another on it (after 20 more warm-up requests on it), then does the same with a
new connection per request. Each round runs every configuration, in an order rotated by one per
round. It prints, per configuration and client mode, the median and p90 ms per request (median and
min-max over rounds), the worst request, the server's CPU ms per request (its whole process tree,
from /proc: clock-tick resolution, so read it over a few hundred requests), and the load average.

Every configuration names its event loop (`--loop asyncio|uvloop`) and HTTP protocol (`--http`)
explicitly, so none depends on what uvicorn's `auto` finds installed: asyncio against uvloop, uvicorn's
h11 (pure Python) against httptools (C), on one worker and with `--workers 2`, stock and with
charming.serving's protocol classes (TCP_NODELAY on every accepted connection; see
charming/serving.py for why `--workers` on asyncio needs them and uvloop does not).
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from measure import Spread, banner, load, tree_cpu

ROOT = Path(__file__).resolve().parents[1]
NODELAY_H11 = "charming.serving:NoDelayH11Protocol"
NODELAY_HTTPTOOLS = "charming.serving:NoDelayHttpToolsProtocol"
# (label, workers, loop, http): asyncio + h11 is what uvicorn runs without uvloop and httptools installed,
# uvloop + httptools what its `auto` picks with them (requirements.txt).
CONFIGURATIONS: list[tuple[str, int, str, str]] = [
    ("1 worker, asyncio, h11", 1, "asyncio", "h11"),
    ("1 worker, asyncio, httptools", 1, "asyncio", "httptools"),
    ("1 worker, uvloop, h11", 1, "uvloop", "h11"),
    ("1 worker, uvloop, httptools", 1, "uvloop", "httptools"),
    ("2 workers, asyncio, h11", 2, "asyncio", "h11"),
    ("2 workers, asyncio, NoDelayH11", 2, "asyncio", NODELAY_H11),
    ("2 workers, asyncio, httptools", 2, "asyncio", "httptools"),
    ("2 workers, asyncio, NoDelayHttpTools", 2, "asyncio", NODELAY_HTTPTOOLS),
    ("2 workers, uvloop, h11", 2, "uvloop", "h11"),
    ("2 workers, uvloop, httptools", 2, "uvloop", "httptools"),
    ("2 workers, uvloop, NoDelayHttpTools", 2, "uvloop", NODELAY_HTTPTOOLS),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(port: int, path: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", path)
            connection.getresponse().read()
            connection.close()
            return
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the server did not start") from None
            time.sleep(0.2)


def _wait_idle(pid: int) -> None:
    """Wait until the server's process tree stops using CPU: every worker (and its CEL worker) has started."""
    deadline = time.monotonic() + 60
    previous = tree_cpu(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        current = tree_cpu(pid)
        if current - previous < 0.02:
            return
        previous = current


def _kept_alive(port: int, path: str, requests: int, server_pid: int) -> tuple[list[float], float]:
    """ms per request on one connection (after 20 warm-up requests on it), and the server's CPU seconds for them."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    timings: list[float] = []
    for index in range(requests + 20):
        if index == 20:
            start_cpu = tree_cpu(server_pid)
        start = time.perf_counter()
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        elapsed = time.perf_counter() - start
        if response.status != 200:
            raise RuntimeError(f"GET {path} answered {response.status}")
        if index >= 20:
            timings.append(elapsed * 1000)
    cpu = tree_cpu(server_pid) - start_cpu
    connection.close()
    return timings, cpu


def _new_connections(port: int, path: str, requests: int, server_pid: int) -> tuple[list[float], float]:
    """ms per request with a new connection for each, and the server's CPU seconds for them."""
    timings: list[float] = []
    start_cpu = tree_cpu(server_pid)
    for _ in range(requests):
        start = time.perf_counter()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", path)
        connection.getresponse().read()
        connection.close()
        timings.append((time.perf_counter() - start) * 1000)
    return timings, tree_cpu(server_pid) - start_cpu


@dataclass(frozen=True)
class Phase:
    """One client mode of one configuration in one round: ms per request, server CPU ms per request."""

    median: float
    p90: float
    worst: float
    cpu: float

    @classmethod
    def of(cls, timings: list[float], server_cpu_seconds: float) -> Phase:
        ordered = sorted(timings)
        p90 = ordered[int(len(ordered) * 0.9) - 1]
        return cls(statistics.median(ordered), p90, ordered[-1], server_cpu_seconds * 1000 / len(timings))


def _run(workers: int, loop: str, http: str, args: argparse.Namespace, workdir: str) -> tuple[Phase, Phase]:
    """Start the server with this configuration, measure both client modes, stop it."""
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "charming.settings",
        "DATABASE_URL": f"sqlite:///{workdir}/keepalive.sqlite3",
        "CHARMING_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "LOG_LEVEL": "WARNING",
    }
    command = [sys.executable, "-m", "uvicorn", "charming.asgi:application", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--log-level", "warning", "--no-access-log"]
    command += ["--loop", loop, "--http", http]
    if workers > 1:
        command += ["--workers", str(workers)]
    server = subprocess.Popen(command, env=env, cwd=ROOT)
    try:
        _wait_ready(port, args.path, server)
        _new_connections(port, args.path, 20, server.pid)  # warm-up, for every worker
        _wait_idle(server.pid)
        kept = Phase.of(*_kept_alive(port, args.path, args.requests, server.pid))
        fresh = Phase.of(*_new_connections(port, args.path, args.requests, server.pid))
    finally:
        server.terminate()
        server.wait(timeout=30)
    return kept, fresh


def _row(label: str, mode: str, phases: list[Phase]) -> str:
    def spread(values: list[float]) -> str:
        return Spread.of(values).show(2)

    return (
        f"{label:38s} {mode:14s}  median {spread([p.median for p in phases]):20s}"
        f"  p90 {spread([p.p90 for p in phases]):20s}  max {max(p.worst for p in phases):6.2f}"
        f"  server CPU {spread([p.cpu for p in phases])}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200, help="requests per configuration, client mode and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each over every configuration (rotated order)")
    parser.add_argument("--path", default="/.well-known/oauth-protected-resource/mcp", help="a GET that needs no auth")
    parser.add_argument("--only", default="", help="run only the configurations whose label contains this text")
    args = parser.parse_args()
    configurations = [configuration for configuration in CONFIGURATIONS if args.only in configuration[0]]
    if not configurations:
        parser.error(f"--only {args.only!r} matches no configuration: {', '.join(c[0] for c in CONFIGURATIONS)}")
    banner(f"keep-alive: {args.requests} GETs {args.path} per configuration and client mode, {args.rounds} rounds")
    results: dict[str, tuple[list[Phase], list[Phase]]] = {label: ([], []) for label, *_ in configurations}
    with tempfile.TemporaryDirectory(prefix="charming-keepalive-") as workdir:
        for round_index in range(args.rounds):
            shift = round_index % len(configurations)
            for label, workers, loop, http in configurations[shift:] + configurations[:shift]:
                kept, fresh = _run(workers, loop, http, args, workdir)
                results[label][0].append(kept)
                results[label][1].append(fresh)
            print(f"round {round_index + 1} of {args.rounds} done, load average {load()}", flush=True)
    print("ms per request: median (min-max) over rounds of each round's median and p90; max over all requests;")
    print("server CPU: ms per request of the server's process tree, median (min-max) over rounds")
    for label, (kept_rounds, fresh_rounds) in results.items():
        print(_row(label, "keep-alive", kept_rounds))
        print(_row("", "new connection", fresh_rounds))
    print(f"load average after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
