from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_env_example_copied_to_env_parses_to_clean_values():
    """README says to copy .env.example to .env: every value must read back without comment text."""
    values: dict[str, str] = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key] = value
    assert values, ".env.example lists no variables"
    for key, value in values.items():
        assert "#" not in value and value == value.strip(), f"{key}={value!r} would keep comment text or spaces"


def test_every_setting_read_from_the_environment_is_in_env_example():
    settings_source = (ROOT / "charming" / "settings.py").read_text()
    read = set(re.findall(r'env(?:\.\w+)?\(\s*"([A-Z0-9_]+)"', settings_source))
    listed = {line.split("=", 1)[0] for line in (ROOT / ".env.example").read_text().splitlines() if "=" in line}
    assert read, "found no env reads in settings.py"
    assert read <= listed, f"missing from .env.example: {sorted(read - listed)}"
