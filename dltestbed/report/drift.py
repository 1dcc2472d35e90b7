"""Drift of a node's software, firmware and host against its fleet: each fact (driver, CUDA, VBIOS, the PCIe link's
maximum, ECC and MIG mode, power limit, kernel, the host's CPUs, SMT, NUMA nodes, memory, hugepages and governor,
dltestbed's and the frameworks' versions) against a golden spec
where the site gives one, else against the value most of the nodes have. A fact with no majority (a tie) cannot
be judged. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from dltestbed.report.verdicts import FAIL, UNDECIDED
from dltestbed.workload.frameworks import REGISTRY

GOLDEN = "the golden spec"
# The facts preflight compares, in the order a report lists them, with their words.
FACTS = {
    "driver": "NVIDIA driver",
    "cuda": "CUDA (driver's)",
    "vbios": "VBIOS",
    "pcie_max": "PCIe link at its maximum",
    "ecc_mode": "ECC mode",
    "mig_mode": "MIG mode",
    "power_limit_w": "power limit",
    "kernel": "kernel",
    "cpu_model": "CPU model",
    "cpus_online": "CPUs online",
    "cpus_usable": "CPUs usable",
    "smt": "SMT",
    "numa_nodes": "NUMA nodes",
    "memory_gib": "memory",
    "hugepages": "hugepages",
    "cpu_governor": "CPU governor",
    "dltestbed": "dltestbed",
    **{fw.package_fact: fw.label for fw in REGISTRY.values()},
}


@dataclass(frozen=True)
class Drift:
    """One fact of one node that differs from its fleet's (or cannot be compared)."""

    node: str
    fact: str
    value: str  # "" when the node did not report it
    expected: str
    basis: str  # "the golden spec", or "7 of 8 nodes"
    verdict: str  # fail (drifted) or cannot judge (no majority)

    @property
    def why(self) -> str:
        """In words."""
        what = FACTS.get(self.fact, self.fact)
        if self.verdict == UNDECIDED:
            return f"{what}: {self.value or 'not reported'}; the fleet has no majority ({self.basis})"
        where = "the golden spec says" if self.basis == GOLDEN else f"{self.basis} have"
        return f"{what} {self.value or 'not reported'}, where {where} {self.expected}"


def drift(facts: Mapping[str, Mapping[str, str]], golden: Mapping[str, str] | None = None) -> list[Drift]:
    """Every node's facts against the golden spec (its facts only; the others against the majority) or the
    majority of the nodes that reported the fact (more than half of them), node by node in the order given."""
    golden = golden or {}
    out = []
    names = [f for f in FACTS if any(f in node_facts for node_facts in facts.values())]
    names += sorted({f for node_facts in facts.values() for f in node_facts} - set(FACTS))
    for fact in names:
        if fact in golden:
            expected, basis, tie = golden[fact], GOLDEN, False
        else:
            counts = Counter(v[fact] for v in facts.values() if fact in v)
            (expected, n), *rest = counts.most_common()
            total = sum(counts.values())
            tie = bool(rest) and n * 2 <= total
            basis = f"{n} of {total} nodes" if not tie else ", ".join(f"{k}: {c}" for k, c in counts.most_common())
        for node, node_facts in facts.items():
            value = node_facts.get(fact, "")
            if tie:
                out.append(Drift(node, fact, value, "", basis, UNDECIDED))
            elif value != expected:
                out.append(Drift(node, fact, value, expected, basis, FAIL))
    return sorted(out, key=lambda d: (list(facts).index(d.node), names.index(d.fact)))
