"""What `validate` says of each check or rule: pass, fail or cannot judge, with its evidence."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PASS, FAIL, UNDECIDED = "pass", "fail", "cannot judge"


@dataclass(frozen=True)
class Judgement:
    """One check's or rule's outcome with its evidence."""

    name: str
    status: str  # pass | fail | cannot judge
    evidence: str
    what: str  # images_per_sec | max_overhead_percent | health.<rule>

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)
