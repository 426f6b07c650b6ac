"""docs/operations.md promises to list every environment variable and every audit action."""

from __future__ import annotations

import re
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[1]
GUIDE = (BASE_DIR / "docs" / "operations.md").read_text()


def test_every_environment_variable_read_by_settings_is_documented():
    settings_source = (BASE_DIR / "charming" / "settings.py").read_text()
    names = set(re.findall(r"env(?:\.\w+)?\(\s*\"([A-Z][A-Z0-9_]+)\"", settings_source))
    assert {"DATABASE_URL", "CHARMING_STORAGE_RETENTION_DAYS"} <= names
    missing = sorted(name for name in names if f"`{name}`" not in GUIDE)
    assert missing == [], f"add these to the table in docs/operations.md: {missing}"


def test_every_audit_action_written_by_the_code_is_documented():
    sources = "\n".join(p.read_text() for p in (BASE_DIR / "apps_registry" / "services").glob("*.py"))
    actions = set(re.findall(r"action=\"([a-z_]+\.[a-z_]+)\"", sources))
    assert {"app.delete", "app.purge", "storage.purge", "storage.restore"} <= actions
    missing = sorted(action for action in actions if f"| `{action}` |" not in GUIDE)
    assert missing == [], f"describe these audit actions in docs/operations.md: {missing}"
