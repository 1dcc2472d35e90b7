"""What a bench gives back (an outcome), and who hears of its progress (an observer); what it is asked, the
request, is dltestbed/requests/bench.py's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from dltestbed.errors import DltestbedError
from dltestbed.runner import NullObserver, Observer

if TYPE_CHECKING:
    from dltestbed.results.records import RunRecord


@dataclass(frozen=True)
class BenchOutcome:
    """What a bench did: its id, the kinds it chose, every run's record (failed ones included), the notes
    it ends with, and the store that holds them."""

    bench_id: str
    kinds: tuple[str, ...]
    records: tuple[RunRecord, ...]
    notes: tuple[str, ...]
    store: Path
    planned: tuple[str, ...] = ()  # --dry-run: the runs it would make, a line each, and the total

    @property
    def failed(self) -> list[RunRecord]:
        """The runs that did not end ok."""
        return [r for r in self.records if r.status != "ok"]


class BenchObserver(Observer, Protocol):
    """Progress: the runs' begin, steps and end, and each line of what the bench chose or did."""

    def say(self, line: str) -> None: ...

    def expect(self, runs: int, at_most: bool) -> None:
        """How many runs the bench will make (at most that many with --repeat auto)."""


class Silent(NullObserver):
    """A BenchObserver that shows nothing: a program that reads the outcome (a script in bench/, a test)."""

    def say(self, line: str) -> None:
        """Nothing."""

    def expect(self, runs: int, at_most: bool) -> None:
        """Nothing."""


class BenchInterrupted(DltestbedError):
    """Ctrl-C (or SIGTERM) stopped the bench; what was running is stored failed, nothing is left behind."""

    exit_code = 130
