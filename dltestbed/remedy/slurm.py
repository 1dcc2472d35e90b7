"""Slurm's remedies: `--on-fail drain` drains a failed node with its reason, `--on-pass resume` resumes a node
that passed, each an `scontrol update`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dltestbed.remedy.base import ON_FAIL, ON_PASS, Command, Where, reason


@dataclass(frozen=True)
class Drain:
    """`scontrol update nodename=… state=drain reason="dltestbed: …"`."""

    name: ClassVar[str] = "drain"
    options: ClassVar[tuple[str, ...]] = (ON_FAIL,)

    def action(self, node: str, failed: bool, why: str, where: Where) -> Command:
        return Command(("scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason(why)}"))

    def unknown(self, nodes: tuple[str, ...], where: Where, option: str) -> str | None:
        return None  # scontrol names a node it does not know when it runs


@dataclass(frozen=True)
class Resume:
    """`scontrol update nodename=… state=resume`."""

    name: ClassVar[str] = "resume"
    options: ClassVar[tuple[str, ...]] = (ON_PASS,)

    def action(self, node: str, failed: bool, why: str, where: Where) -> Command:
        return Command(("scontrol", "update", f"nodename={node}", "state=resume"))

    def unknown(self, nodes: tuple[str, ...], where: Where, option: str) -> str | None:
        return None
