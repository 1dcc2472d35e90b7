"""An acceptance's progress, kept in its folder (`accept-state.json`) after each stage: which stages finished,
on which inputs (a digest), with which benches in the store. `--resume` reads it and repeats no finished stage
whose inputs are the same."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dltestbed.errors import ConfigError
from dltestbed.results.records import new_id, now_iso

FILE = "accept-state.json"
CARRIED = "provision"  # the stage a new acceptance in the same folder takes over (its inputs are not the request's)


def digest(inputs: Any) -> str:
    """A stage's inputs (JSON-able) as a short digest."""
    text = json.dumps(inputs, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class StageRecord:
    """One finished stage: the digest of its inputs, the benches it stored, what it found, when."""

    key: str
    benches: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    finished_at: str = ""


@dataclass
class State:
    """One acceptance: its id, when it started, its request's digest and its finished stages."""

    folder: Path
    id: str
    started_at: str
    request: str  # the digest of what was asked (inventory, level, options)
    stages: dict[str, StageRecord] = field(default_factory=dict)
    resumes: int = 0  # how many times it was resumed: each resume tries the nodes left out again

    @classmethod
    def begin(cls, folder: Path, request: str, resume: bool) -> tuple[State, bool]:
        """The acceptance to go on with (resume, when its folder holds one for the same request) or a new one;
        and whether it was resumed."""
        path = folder / FILE
        if resume:
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
                stages = {k: StageRecord(**v) for k, v in doc["stages"].items()}
                old = cls(folder, doc["id"], doc["started_at"], doc["request"], stages, int(doc.get("resumes", 0)))
            except FileNotFoundError:
                raise ConfigError(f"--resume: {folder} holds no acceptance to resume; run without --resume") from None
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"--resume: {path} cannot be read ({exc}); run without --resume") from None
            if old.request != request:
                raise ConfigError(
                    f"--resume: the acceptance in {folder} was asked with other inputs (inventory, level or "
                    "options); run without --resume, or with the same ones"
                )
            old.resumes += 1
            return old, True
        fresh = cls(folder, new_id("a"), now_iso(), request)
        carried = _previous(path, CARRIED)
        if carried is not None:  # a provisioning that passed stands for a new acceptance of the same nodes
            fresh.stages[CARRIED] = carried
        return fresh, False

    def finished(self, name: str, key: str) -> StageRecord | None:
        """The stage's record when it finished on these inputs."""
        rec = self.stages.get(name)
        return rec if rec is not None and rec.key == key else None

    def record(self, name: str, rec: StageRecord) -> None:
        """Keep a finished stage, written at once (a stop after this repeats it no more)."""
        rec.finished_at = rec.finished_at or now_iso()
        self.stages[name] = rec
        self.save()

    def benches(self) -> list[str]:
        """Every bench the finished stages stored, in order."""
        return [b for rec in self.stages.values() for b in rec.benches]

    def save(self) -> None:
        doc = {
            "id": self.id,
            "started_at": self.started_at,
            "request": self.request,
            "stages": {k: asdict(v) for k, v in self.stages.items()},
            "resumes": self.resumes,
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{FILE}.tmp"
        tmp.write_text(json.dumps(doc, indent=2), encoding="utf-8")
        os.replace(tmp, self.folder / FILE)


def _previous(path: Path, stage: str) -> StageRecord | None:
    """A stage's record in an earlier acceptance's state file, if there is one that reads."""
    try:
        return StageRecord(**json.loads(path.read_text(encoding="utf-8"))["stages"][stage])
    except (OSError, ValueError, KeyError, TypeError):
        return None
