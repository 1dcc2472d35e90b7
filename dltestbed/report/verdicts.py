"""What `validate` says of each check or rule: pass, fail or cannot judge, with its evidence."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PASS, FAIL, UNDECIDED = "pass", "fail", "cannot judge"
WARN = "warn"  # acceptance's third verdict: a finding that does not fail a GPU alone (report/xids.py)
SKIPPED = "skipped"  # a check not made, with why (acceptance of one node: no pair, no peers); never a pass


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
