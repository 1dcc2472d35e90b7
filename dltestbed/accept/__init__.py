"""Acceptance of new nodes in one call: from an inventory to a verdict per node and GPU, with the evidence pack
signed and the failed nodes drained when asked (`dltestbed accept`)."""

from __future__ import annotations

from dltestbed.accept.run import AcceptOutcome, run_accept, run_init
from dltestbed.requests.accept import AcceptRequest

__all__ = ["AcceptOutcome", "AcceptRequest", "run_accept", "run_init"]
