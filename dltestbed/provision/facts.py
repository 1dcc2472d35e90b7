"""What the facts phase found about a host, and the TensorFlow build it gets. Pure functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi reports it."""

    index: int
    name: str
    driver: str
    memory: str
    pci_bus_id: str


def parse_nvidia_smi(lines: list[str]) -> list[Gpu]:
    """Rows of `nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id
    --format=csv,noheader`; rows that do not have five fields are ignored."""
    gpus = []
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5 or not parts[0].isdigit():
            continue
        gpus.append(Gpu(int(parts[0]), parts[1], parts[2], parts[3], parts[4]))
    return gpus


def choose_flavor(facts: dict[str, Any]) -> tuple[str | None, str | None]:
    """(flavor, None) — `gpu` when the NVIDIA driver answers with GPUs, else `cpu` — or
    (None, reason) when the host has NVIDIA GPUs but no working driver."""
    pci = [str(p) for p in facts.get("pci_gpus") or []]
    rc = int(facts.get("nvidia_smi_rc", 127) or 0)
    gpus = parse_nvidia_smi([str(x) for x in facts.get("nvidia_smi") or []])
    if rc == 0 and gpus:
        return "gpu", None
    if pci:
        err = str(facts.get("nvidia_smi_error") or "").strip().splitlines()
        if rc in (2, 127):  # the command module's "not found"
            return None, f"{len(pci)} NVIDIA GPU(s) on the PCI bus but no nvidia-smi: is the NVIDIA driver installed?"
        return None, f"{len(pci)} NVIDIA GPU(s) on the PCI bus but nvidia-smi fails: {err[0] if err else f'rc {rc}'}"
    return "cpu", None


# The facts role's two GPU probes in one shell script, for a host reached over SSH outside Ansible
# (bench looks up the image of a host's flavour): each output line is tagged for parse_gpu_probe.
GPU_PROBE = r"""for d in /sys/bus/pci/devices/*; do
[ "$(cat "$d/vendor" 2>/dev/null)" = 0x10de ] && case "$(cat "$d/class")" in 0x03*) echo "pci ${d##*/}";; esac
done
out=$(nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv,noheader 2>&1)
rc=$?
if [ $rc -eq 0 ]; then tag=smi; else tag=err; fi
printf '%s\n' "$out" | sed -n "s/^./$tag &/p"
echo "rc $rc"
"""


def parse_gpu_probe(lines: list[str]) -> dict[str, Any]:
    """GPU_PROBE's output as the facts role reports it: pci_gpus, nvidia_smi_rc, nvidia_smi, nvidia_smi_error."""
    facts: dict[str, Any] = {"pci_gpus": [], "nvidia_smi": [], "nvidia_smi_rc": 127, "nvidia_smi_error": ""}
    errors = []
    for line in lines:
        tag, _, rest = line.rstrip("\n").partition(" ")
        if tag == "pci":
            facts["pci_gpus"].append(rest)
        elif tag == "smi":
            facts["nvidia_smi"].append(rest)
        elif tag == "err":
            errors.append(rest)
        elif tag == "rc" and rest.strip().isdigit():
            facts["nvidia_smi_rc"] = int(rest)
    facts["nvidia_smi_error"] = "\n".join(errors)
    return facts


def known_hosts_lines(address: str, port: int, name: str, host_keys: dict[str, str]) -> list[str]:
    """known_hosts lines for a host's reported public keys (OpenSSH format, [addr]:port off 22)."""
    who = ",".join(dict.fromkeys([address, name] if port == 22 else [f"[{address}]:{port}", f"[{name}]:{port}"]))
    return [f"{who} {kind} {key}" for kind, key in host_keys.items() if key]


def python_mismatch(facts: dict[str, Any], controller: str) -> str | None:
    """Why a host cannot take this controller's wheelhouse (built for Python `controller`), or None."""
    host = str(facts.get("python") or "")
    if host == controller:
        return None
    return (
        f"the host has Python {host or 'unknown'} and this controller builds wheels for Python {controller}: "
        f"run dltestbed from a Python {host} venv, or give the host python{controller}"
    )
