"""Plain types the engine's layers share, at the bottom of its imports: a step kind names its advisories with
them without importing the advisories module (which imports the compiler, which imports the steps)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Problem:
    """One problem of a definition: where (a path into it) and what, with the limit when one was passed."""

    path: str
    message: str
    limit: str | None = None
    max: int | None = None

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"path": self.path, "message": self.message}
        if self.limit is not None:
            found["limit"] = self.limit
            found["max"] = self.max
        return found


@dataclass(frozen=True)
class AdvisoryDraft:
    """An authoring advisory before it is stored: kind, severity, the agent's and the person's summaries."""

    kind: str
    severity: str
    summary: str
    user_summary: str
    data: dict[str, Any] = field(default_factory=dict)
