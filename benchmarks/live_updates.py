"""What live app pages cost the server per 100 open pages: polling the changes counter (what Charming serves,
apps_registry/pages/live.py) against server-sent events (benchmarks/live_prototypes.py).

    .venv/bin/python benchmarks/live_updates.py                  # 100 pages, 20 s per phase
    .venv/bin/python benchmarks/live_updates.py --pages 200 --seconds 30
    .venv/bin/python benchmarks/live_updates.py --quick          # 8 s per phase

It sets up a temporary SQLite database (one person, the to-do example with a few records), starts
`uvicorn live_prototypes:application` (Charming's ASGI application plus the prototype's event streams) on a
fresh port and opens `--pages` simulated pages: asyncio clients, each on its own kept-alive connection(s), signed
in with a session cookie and holding the page's live token. Per option, two phases of `--seconds` each:

- idle: nobody writes. Polling pages ask /apps/<id>/changes/?since=n every second (staggered; 204 each time),
  as live.js does; event-stream pages hold GET /apps/<id>/events/ open (and a second connection for fetches).
- writes: this process (not the server: a write from another process) adds a to-do every `--write-every`
  seconds through the services. Each page, once told (a 200 poll, or an event), fetches the app page again, as
  live.js does: that fetch costs the same for both options, and shows in the figures.

It prints, per option and phase, the server's CPU (its process tree, from /proc) as a share of one core and per
100 pages, the requests it answered, the server's established connections (from /proc/net/tcp), and in the
writes phase how long pages took to learn of a write (median and max over pages and writes), with the load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from measure import RATE_LIMITS_HIGH, banner, load, tree_cpu

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _established(port: int) -> int:
    """Connections in ESTABLISHED state whose local port is the server's (IPv4 and IPv6)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


@dataclass
class Setup:
    app_id: str
    live_url: str  # path and query, with the token
    cookie: str
    page_path: str


def _setup(database: str) -> Setup:
    os.environ["DATABASE_URL"] = f"sqlite:///{database}"
    os.environ.update(RATE_LIMITS_HIGH)  # this process's calls and the server's (it inherits the environment)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "charming.settings")
    # This process reads the counter between its clients' awaits (a quick read by key); the server is not told.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command

    from apps_registry.pages.live import live_context
    from apps_registry.services.accounts import account_create
    from apps_registry.services.definitions import app_definition_save
    from apps_registry.services.routes import route_run

    call_command("migrate", verbosity=0)
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"  # the sign-up's mail stays here
    import json

    person = account_create(username="reader", email="reader@example.com", password="a long benchmark passphrase")
    app = app_definition_save(actor=person, definition=json.loads((ROOT / "examples" / "todo.json").read_text()))
    for n in range(5):
        route_run(actor=person, app_id=app.id, op="add_todo", params={"title": f"Item {n}"}, kind="mutation")
    session = SessionStore()
    session[SESSION_KEY] = str(person.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = person.get_session_auth_hash()
    session.create()
    live = live_context(app_id=app.id, user_pk=person.pk, changes=0)
    return Setup(
        app_id=str(app.id),
        live_url=live["live_url"],
        cookie=f"{settings.SESSION_COOKIE_NAME}={session.session_key}",
        page_path=f"/apps/{app.id}/",
    )


def _changes_now(app_id: str) -> int:
    from apps_registry.selectors import records_changes_of

    return records_changes_of(app_id=app_id) or 0


def _write(app_id: str, n: int) -> None:
    from django.contrib.auth import get_user_model

    from apps_registry.services.routes import route_run

    person = get_user_model().objects.get(username="reader")
    route_run(actor=person, app_id=app_id, op="add_todo", params={"title": f"Written {n}"}, kind="mutation")


class Http:
    """One kept-alive HTTP/1.1 connection: enough of a client for GETs with a Content-Length or a stream."""

    def __init__(self, port: int, cookie: str) -> None:
        self.port, self.cookie = port, cookie
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def send(self, path: str) -> None:
        assert self.writer is not None
        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nCookie: {self.cookie}\r\n\r\n"
        self.writer.write(request.encode())
        await self.writer.drain()

    async def head(self) -> tuple[int, dict[str, str]]:
        assert self.reader is not None
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("the server closed the connection")
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    async def get(self, path: str) -> tuple[int, bytes]:
        try:
            await self.send(path)
            status, headers = await self.head()
        except (ConnectionError, asyncio.IncompleteReadError):
            # uvicorn closes a connection idle for 5 s (--timeout-keep-alive), as a browser's would be: open another
            self.close()
            await self.open()
            await self.send(path)
            status, headers = await self.head()
        assert self.reader is not None
        body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return status, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


@dataclass
class Tally:
    requests: int = 0
    errors: int = 0
    learned: list[float] = field(default_factory=list)  # seconds from a write to a page knowing of it


async def _poll_page(
    port: int, setup: Setup, stop: float, tally: Tally, writes: dict[int, float], *, before_django: bool = False
) -> None:
    http = Http(port, setup.cookie)
    live_url = setup.live_url if before_django else setup.live_url.replace("/changes/", "/changes-django/")
    await http.open()
    changes = _changes_at_start
    await asyncio.sleep(random.random())  # pages opened at different moments
    try:
        while time.monotonic() < stop:
            started = time.monotonic()
            status, body = await http.get(f"{live_url}&since={changes}")
            tally.requests += 1
            if status == 200:
                changes = int(re.search(rb"\d+", body).group(0))  # type: ignore[union-attr]
                if changes in writes:
                    tally.learned.append(time.monotonic() - writes[changes])
                page_status, _page = await http.get(setup.page_path)
                tally.requests += 1
                tally.errors += page_status != 200
            elif status != 204:
                tally.errors += 1
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    finally:
        http.close()


async def _sse_page(port: int, setup: Setup, stop: float, tally: Tally, writes: dict[int, float]) -> None:
    stream, fetch = Http(port, setup.cookie), Http(port, setup.cookie)
    await stream.open()
    await fetch.open()
    events_url = setup.live_url.replace("/changes/", "/events/")
    await asyncio.sleep(random.random())
    try:
        await stream.send(f"{events_url}&since={_changes_at_start}")
        status, _headers = await stream.head()
        tally.requests += 1
        if status != 200:
            tally.errors += 1
            return
        assert stream.reader is not None
        while True:
            left = stop - time.monotonic()
            if left <= 0:
                return
            try:
                line = await asyncio.wait_for(stream.reader.readline(), left)
            except TimeoutError:
                return
            if line.startswith(b"data:"):
                changes = int(line[5:].strip())
                if changes in writes:
                    tally.learned.append(time.monotonic() - writes[changes])
                page_status, _page = await fetch.get(setup.page_path)
                tally.requests += 1
                tally.errors += page_status != 200
    finally:
        stream.close()
        fetch.close()


_changes_at_start = 0


async def _phase(
    option: str, port: int, setup: Setup, args: argparse.Namespace, server_pid: int, *, writing: bool
) -> dict[str, float]:
    global _changes_at_start
    _changes_at_start = _changes_now(setup.app_id)
    tally = Tally()
    writes: dict[int, float] = {}
    stop = time.monotonic() + args.seconds + 1.0
    if option == "events":
        tasks = [asyncio.ensure_future(_sse_page(port, setup, stop, tally, writes)) for _ in range(args.pages)]
    else:
        before_django = option == "polling"
        tasks = [
            asyncio.ensure_future(_poll_page(port, setup, stop, tally, writes, before_django=before_django))
            for _ in range(args.pages)
        ]
    await asyncio.sleep(1.0)  # every page open
    connections = _established(port)
    cpu_start, wall_start = tree_cpu(server_pid), time.monotonic()
    requests_start = tally.requests
    n = 0
    while time.monotonic() < stop - 0.5:
        if writing:
            n += 1
            _write(setup.app_id, n)
            writes[_changes_now(setup.app_id)] = time.monotonic()
        await asyncio.sleep(args.write_every if writing else 0.5)
    cpu, wall = tree_cpu(server_pid) - cpu_start, time.monotonic() - wall_start
    answered = tally.requests - requests_start
    await asyncio.gather(*tasks)
    learned = sorted(tally.learned)
    return {
        "cpu_share": cpu / wall,
        "requests_per_s": answered / wall,
        "connections": connections,
        "errors": tally.errors,
        "writes": n,
        "learned_median": statistics.median(learned) if learned else float("nan"),
        "learned_max": learned[-1] if learned else float("nan"),
        "told": len(learned),
    }


def _counter_cost(setup: Setup, calls: int) -> None:
    """ms per update-only mutation (rename_todo) through route_run in this process, with the counter's UPDATE (as
    served) and without it (SqlStore.records_changed skipped when no record was added or deleted: what such a
    mutation cost before the counter), alternating rounds of `calls` calls."""
    from django.contrib.auth import get_user_model

    from apps_registry.models import Record
    from apps_registry.routes import storage
    from apps_registry.services.routes import route_run

    person = get_user_model().objects.get(username="reader")
    todo = Record.objects.filter(storage__app_id=setup.app_id, collection="todos").first()
    assert todo is not None
    served = storage.SqlStore.records_changed

    def without_counter(self: storage.SqlStore, delta: int) -> int:
        return 0 if delta == 0 else served(self, delta)

    figures: dict[str, list[float]] = {"with the counter": [], "without it": []}
    for _round in range(3):
        for label in figures:
            storage.SqlStore.records_changed = served if label == "with the counter" else without_counter  # type: ignore[method-assign]
            start = time.perf_counter()
            for n in range(calls):
                params = {"id": todo.record_id, "title": f"Renamed {n}"}
                route_run(actor=person, app_id=setup.app_id, op="rename_todo", params=params, kind="mutation")
            figures[label].append((time.perf_counter() - start) * 1000 / calls)
    storage.SqlStore.records_changed = served  # type: ignore[method-assign]
    for label, values in figures.items():
        print(
            f"update-only mutation (rename_todo), {label:16s}: {statistics.median(values):.3f} ms per call "
            f"(rounds: {', '.join(f'{v:.3f}' for v in values)}), load average {load()}"
        )


def _run(args: argparse.Namespace, workdir: str) -> None:
    database = f"{workdir}/live.sqlite3"
    setup = _setup(database)
    _counter_cost(setup, 50 if args.quick else 300)
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "charming.settings",
        "DATABASE_URL": f"sqlite:///{database}",
        "CHARMING_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    command = [sys.executable, "-m", "uvicorn", "live_prototypes:application", "--app-dir", str(ROOT / "benchmarks")]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log"]
    command += ["--http", "charming.serving:NoDelayHttpToolsProtocol"]
    server = subprocess.Popen(command, env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.2)
        # warm up (both endpoints, and the page) before measuring
        asyncio.run(
            _phase("polling", port, setup, argparse.Namespace(**{**vars(args), "seconds": 2}), server.pid, writing=True)
        )
        print(
            "option    phase   server CPU (% of a core)   ms per s per page   requests/s   connections"
            "   told of a write (median / max)"
        )
        for option in ("polling", "poll-view", "events"):
            for writing in (False, True):
                figures = asyncio.run(_phase(option, port, setup, args, server.pid, writing=writing))
                told = (
                    f"{figures['learned_median']:.2f} s / {figures['learned_max']:.2f} s"
                    f" ({int(figures['told'])} of {int(figures['writes']) * args.pages})"
                    if writing
                    else "-"
                )
                print(
                    f"{option:9s} {'writes' if writing else 'idle':7s} {figures['cpu_share'] * 100:12.1f} %"
                    f"            {figures['cpu_share'] * 1000 / args.pages:8.3f}      "
                    f"  {figures['requests_per_s']:9.1f}   {int(figures['connections']):9d}     {told}"
                    + (f"  ERRORS {int(figures['errors'])}" if figures["errors"] else ""),
                    flush=True,
                )
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=100, help="open pages simulated")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds per option and phase")
    parser.add_argument("--write-every", type=float, default=5.0, help="seconds between writes in the writes phase")
    parser.add_argument("--quick", action="store_true", help="8 s per phase")
    args = parser.parse_args()
    if args.quick:
        args.seconds = 8.0
    banner(f"live updates: {args.pages} open pages, {args.seconds:.0f} s per phase, a write every {args.write_every} s")
    with tempfile.TemporaryDirectory(prefix="charming-live-") as workdir:
        _run(args, workdir)
    print(f"load average after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
