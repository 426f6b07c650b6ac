from __future__ import annotations

import os
import re
from pathlib import Path

from django.conf import settings

from apps_registry.routes.limits import LIMIT_SETTINGS

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


def _env_example_lines() -> list[str]:
    return (ROOT / ".env.example").read_text().splitlines()


def test_every_engine_limit_is_in_env_example_with_its_default_and_its_line_of_documentation():
    lines = _env_example_lines()
    for limit in LIMIT_SETTINGS:
        assignment = f"{limit.setting}={limit.default}"
        assert assignment in lines, f".env.example lacks {assignment}"
        comment = lines[lines.index(assignment) - 1]
        assert comment == f"# {limit.doc}", f"{limit.setting}: the comment above it should read '# {limit.doc}'"
    listed = {line.split("=", 1)[0] for line in lines if line.startswith("CHARMING_ROUTES_")}
    assert listed == {limit.setting for limit in LIMIT_SETTINGS}, "a CHARMING_ROUTES_ variable is not declared"


def test_every_engine_limit_is_a_setting_with_its_default():
    for limit in LIMIT_SETTINGS:
        assert getattr(settings, limit.setting) == limit.default or limit.setting in os.environ


def test_the_limits_table_of_the_authoring_docs_shows_every_limit_with_its_default():
    text = (ROOT / "docs" / "authoring.md").read_text()
    section = text.split("\n## Limits\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 4 and cells[1].startswith("`CHARMING_ROUTES_"):
            rows[cells[1].strip("`")] = cells[2]
    assert set(rows) == {limit.setting for limit in LIMIT_SETTINGS}
    for limit in LIMIT_SETTINGS:
        assert rows[limit.setting].split(" ")[0] == str(limit.default), (
            f"{limit.setting}: docs say {rows[limit.setting]}"
        )
