"""Every benchmark script answers --help (a cheap check that it imports and parses its options)."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize(
    "script",
    [
        "mcp_calls.py",
        "route_engine.py",
        "purge_storage.py",
        "cel_libraries.py",
        "aggregate.py",
        "fairness.py",
        "live_updates.py",
        "open_app.py",
        "change_log.py",
        "soak.py",
        "db_units.py",
    ],
)
def test_benchmark_script_prints_its_help(script):
    out = subprocess.run([sys.executable, str(BENCHMARKS / script), "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "--quick" in out.stdout


def test_keepalive_benchmark_prints_its_help():
    out = subprocess.run([sys.executable, str(BENCHMARKS / "keepalive.py"), "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "--rounds" in out.stdout and "--only" in out.stdout


def test_keepalive_benchmark_refuses_an_only_that_matches_no_configuration():
    command = [sys.executable, str(BENCHMARKS / "keepalive.py"), "--only", "3 workers"]
    out = subprocess.run(command, capture_output=True, text=True)
    assert out.returncode == 2
    assert "--only '3 workers' matches no configuration: 1 worker, asyncio, h11" in out.stderr


def test_find_order_benchmark_prints_its_help():
    out = subprocess.run([sys.executable, str(BENCHMARKS / "find_order.py"), "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "--sizes" in out.stdout and "--only" in out.stdout


def test_the_unit_benchmark_prices_each_case():
    out = subprocess.run([sys.executable, str(BENCHMARKS / "db_units.py"), "--quick"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    cases = [line.split("  ")[1] for line in out.stdout.splitlines() if line.endswith("µs CPU")]
    assert cases == [
        "unit, nothing, 1 at once",
        "unit, nothing, 8 at once",
        "unit, SELECT 1, 1 at once",
        "unit, SELECT 1, 8 at once",
        "thread, SELECT 1",
        "thread, kept",
    ]
