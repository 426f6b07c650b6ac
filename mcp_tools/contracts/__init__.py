"""The MCP tool contracts: one JSON file per tool, served verbatim by tools/list (see mcp_tools.registry).

`mutate_app.json` and `delete_app.json` are byte-for-byte copies of the product's promise
(../shared/spec); the companions are written in the same style.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONTRACTS_DIR = Path(__file__).resolve().parent


def contract_load(name: str) -> dict[str, Any]:
    """The contract of tool `name`, parsed from its JSON file."""
    with (CONTRACTS_DIR / f"{name}.json").open(encoding="utf-8") as handle:
        contract: dict[str, Any] = json.load(handle)
    return contract
