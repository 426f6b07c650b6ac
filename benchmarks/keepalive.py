"""Per-request latency on a kept-alive connection, one uvicorn worker against several.

    .venv/bin/python benchmarks/keepalive.py                 # 200 GETs per configuration
    .venv/bin/python benchmarks/keepalive.py --requests 500 --path /.well-known/oauth-protected-resource/mcp

For each configuration it starts `uvicorn charming.asgi:application` on a fresh port (temporary
SQLite database, the trivial GET needs none), opens ONE HTTP/1.1 connection with http.client and
sends the GETs one after another on it (after 20 warm-up requests), then does the same with a new
connection per request. It prints min / median / p90 / max per request in ms and the load average.

Configurations: 1 worker; `--workers 2` as uvicorn ships it; `--workers 2` with
`--http charming.serving:NoDelayH11Protocol` (TCP_NODELAY on every accepted connection; see
charming/serving.py for the cause of the difference).
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGURATIONS: list[tuple[str, list[str]]] = [
    ("1 worker", []),
    ("2 workers", ["--workers", "2"]),
    ("2 workers, NoDelayH11Protocol", ["--workers", "2", "--http", "charming.serving:NoDelayH11Protocol"]),
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


def _kept_alive(port: int, path: str, requests: int) -> list[float]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    timings: list[float] = []
    for index in range(requests + 20):
        start = time.perf_counter()
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        elapsed = time.perf_counter() - start
        if response.status != 200:
            raise RuntimeError(f"GET {path} answered {response.status}")
        if index >= 20:
            timings.append(elapsed * 1000)
    connection.close()
    return timings


def _new_connections(port: int, path: str, requests: int) -> list[float]:
    timings: list[float] = []
    for _ in range(requests):
        start = time.perf_counter()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", path)
        connection.getresponse().read()
        connection.close()
        timings.append((time.perf_counter() - start) * 1000)
    return timings


def _summary(timings: list[float]) -> str:
    ordered = sorted(timings)
    p90 = ordered[int(len(ordered) * 0.9) - 1]
    return f"min {ordered[0]:6.2f}  median {statistics.median(ordered):6.2f}  p90 {p90:6.2f}  max {ordered[-1]:6.2f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200, help="requests per configuration and client mode")
    parser.add_argument("--path", default="/.well-known/oauth-protected-resource/mcp", help="a GET that needs no auth")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="charming-keepalive-") as workdir:
        for label, extra in CONFIGURATIONS:
            port = _free_port()
            env = {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "charming.settings",
                "DATABASE_URL": f"sqlite:///{workdir}/keepalive.sqlite3",
                "CHARMING_PUBLIC_URL": f"http://127.0.0.1:{port}",
                "LOG_LEVEL": "WARNING",
            }
            command = [sys.executable, "-m", "uvicorn", "charming.asgi:application", "--host", "127.0.0.1"]
            command += ["--port", str(port), "--log-level", "warning", "--no-access-log", *extra]
            server = subprocess.Popen(command, env=env, cwd=ROOT)
            try:
                _wait_ready(port, args.path, server)
                kept = _kept_alive(port, args.path, args.requests)
                fresh = _new_connections(port, args.path, args.requests)
            finally:
                server.terminate()
                server.wait(timeout=30)
            print(f"{label:32s} keep-alive     {_summary(kept)}")
            print(f"{'':32s} new connection {_summary(fresh)}")
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
