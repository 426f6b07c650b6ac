from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "conformance_server", Path(__file__).resolve().parents[2] / ".ci" / "conformance_server.py"
)
assert _spec is not None and _spec.loader is not None
conformance_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conformance_server)
main = conformance_server.main


def test_the_no_auth_server_refuses_to_start_without_its_variable(monkeypatch, capsys):
    monkeypatch.delenv("CHARMING_MCP_CONFORMANCE_NO_AUTH", raising=False)

    assert main(["--port", "1"]) == 2
    assert "Refusing to serve /mcp without authentication" in capsys.readouterr().err


def test_the_no_auth_server_refuses_a_non_loopback_address(monkeypatch, capsys):
    monkeypatch.setenv("CHARMING_MCP_CONFORMANCE_NO_AUTH", "1")

    assert main(["--host", "0.0.0.0", "--port", "1"]) == 2
    assert "loopback only" in capsys.readouterr().err


def test_the_normal_application_ignores_the_no_auth_variable(tmp_path):
    script = (
        "import os, django; os.environ['DJANGO_SETTINGS_MODULE'] = 'charming.settings';"
        "from charming.asgi import application; from mcp_tools.auth import BearerAuth;"
        "print(type(application.mcp_app).__name__)"
    )
    env = {"CHARMING_MCP_CONFORMANCE_NO_AUTH": "1", "PATH": "/usr/bin:/bin", "DATABASE_URL": f"sqlite:///{tmp_path}/x"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "BearerAuth"
