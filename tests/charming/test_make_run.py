"""`make run` on a port already in use: it stops at once (before the migrations, so the person waits a second, not
fifteen), says which setting to change, and never prints "Charming is ready" (`python -m charming.serving`, then
demo_setup --listen; charming.serving.listen_problem)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_refuses_a_taken_port_and_names_the_setting(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path}/run.sqlite3"}
    env.pop("CHARMING_PUBLIC_URL", None)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            ["make", "--no-print-directory", "run", f"PORT={port}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert out.returncode != 0
    assert "Charming is ready" not in out.stdout + out.stderr
    assert f"Port {port} on 127.0.0.1 is already in use" in out.stderr
    assert f"make run PORT={port + 1}" in out.stderr
    assert "uvicorn" not in out.stdout  # the server was never started
    assert not (tmp_path / "run.sqlite3").exists()  # nor the migrations: it was said first
