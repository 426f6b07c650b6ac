"""Plain types the engine's layers share, at the bottom of its imports: a step kind names its advisories with
them without importing the advisories module (which imports the compiler, which imports the steps)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class AdvisoryDraft:
    """An authoring advisory before it is stored: kind, severity, the agent's and the person's summaries."""

    kind: str
    severity: str
    summary: str
    user_summary: str
    data: dict[str, Any] = field(default_factory=dict)
