"""How the benchmarks here measure, in one place: CPU time of this process, of a server's process tree and of a
PostgreSQL cluster (read from /proc, Linux only), the machine's load average, and min/median/max over repetitions.

CPU from /proc has the kernel's clock-tick resolution (10 ms at the usual 100 Hz), so a phase must run for a few
hundred milliseconds of CPU before a per-call figure means anything; the benchmarks' phases do.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# The rate limits (apps_registry/ratelimits.py) set so high that no benchmark is ever throttled, yet still checked,
# so their cost stays in the figures (0 would turn them off).
RATE_LIMITS_HIGH = {
    f"CHARMING_RATE_{name}_{part}": "1000000000"
    for name in ("TOKEN", "APP", "AUTH_FAILURES")
    for part in ("PER_MINUTE", "BURST")
}


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(parent pid, own CPU ticks, CPU ticks of reaped children) of `pid`, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # Fields after the command name (which may hold spaces): state, ppid, ... utime(14) stime(15) cutime cstime.
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def tree_cpu(root: int) -> float:
    """Seconds of CPU used so far by process `root` and all its descendants, living or exited.

    An exited child's time moves into its parent's "children" counters when the parent reaps it, so counting
    every living process's own and reaped-children time never loses (or doubles) a finished backend or worker.
    """
    parents: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                parents.setdefault(stat[0], []).append(int(entry.name))
    ticks, pending = 0, [root]
    while pending:
        pid = pending.pop()
        stat = _stat(pid)
        if stat is not None:
            ticks += stat[1] + stat[2]
        pending.extend(parents.get(pid, ()))
    return ticks / CLOCK_TICKS


def process_cpu(pid: int) -> float:
    """Seconds of CPU used so far by process `pid` alone (a PostgreSQL backend, say); 0.0 once it is gone."""
    stat = _stat(pid)
    return 0.0 if stat is None else stat[1] / CLOCK_TICKS


def parent_pid(pid: int) -> int | None:
    """The parent of `pid` (a backend's parent is its cluster's postmaster), or None if `pid` is not here."""
    stat = _stat(pid)
    return None if stat is None else stat[0]


def load() -> str:
    """The machine's load average (1, 5, 15 minutes) and its CPU count, for the record beside every figure."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def banner(title: str) -> None:
    print(f"\n== {title} ==  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load()}")


@dataclass(frozen=True)
class Spread:
    low: float
    median: float
    high: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        ordered = sorted(values)
        return cls(ordered[0], statistics.median(ordered), ordered[-1])

    def show(self, digits: int = 0) -> str:
        """`median (min-max)`, or the one value when every repetition gave the same."""
        if self.low == self.high:
            return f"{self.median:.{digits}f}"
        return f"{self.median:.{digits}f} ({self.low:.{digits}f}-{self.high:.{digits}f})"


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]
