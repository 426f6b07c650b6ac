"""Every benchmark script answers --help (a cheap check that it imports and parses its options)."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize("script", ["mcp_calls.py", "route_engine.py", "purge_storage.py"])
def test_benchmark_script_prints_its_help(script):
    out = subprocess.run([sys.executable, str(BENCHMARKS / script), "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "--quick" in out.stdout
