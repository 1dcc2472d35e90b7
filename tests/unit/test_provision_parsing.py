"""Provisioning's pure parts on captured ansible-runner events and command output."""

from __future__ import annotations

import json

import pytest

from dltestbed.provision.events import HostOutcome, apply, failure_message
from dltestbed.provision.facts import Gpu, choose_flavor, known_hosts_lines, parse_nvidia_smi, python_mismatch
from tests.conftest import DATA

EVENTS = DATA / "ansible"


def event(name: str) -> dict:
    return json.loads((EVENTS / name).read_text())


def test_facts_are_collected_from_the_report_event() -> None:
    hosts: dict[str, HostOutcome] = {}
    assert apply(hosts, event("facts_report.json")) == "lab-h1"
    facts = hosts["lab-h1"].reported["dltestbed_facts"]
    assert facts["python"] == "3.11" and facts["arch"] == "x86_64"
    assert facts["host_keys"]["ssh-ed25519"].startswith("AAAAC3NzaC1lZDI1NTE5")
    assert hosts["lab-h1"].succeeded and hosts["lab-h1"].ok == 1 and hosts["lab-h1"].changed == 0


def test_changed_tasks_are_counted() -> None:
    hosts: dict[str, HostOutcome] = {}
    apply(hosts, event("changed.json"))
    assert hosts["lab-h1"].changed == 1


def test_a_host_without_python_is_named_plainly() -> None:
    hosts: dict[str, HostOutcome] = {}
    apply(hosts, event("no_python.json"))
    h = hosts["nopy"]
    assert not h.succeeded and h.failed == 1
    assert h.message == (
        "Gathering Facts: no Python 3 at /usr/bin/python3-missing (install python3 or set ansible_python_interpreter)"
    )


def test_an_unreachable_host_keeps_ssh_words() -> None:
    hosts: dict[str, HostOutcome] = {}
    apply(hosts, event("unreachable.json"))
    assert hosts["ghost"].unreachable
    assert hosts["ghost"].message == "unreachable: ssh: connect to host 10.213.77.99 port 22: No route to host"


def test_events_without_a_host_are_ignored() -> None:
    hosts: dict[str, HostOutcome] = {}
    assert apply(hosts, {"event": "playbook_on_task_start", "event_data": {"task": "x"}}) is None
    assert apply(hosts, {"event": "runner_on_failed", "event_data": {"host": "a", "ignore_errors": True}}) == "a"
    assert hosts["a"].failed == 0


@pytest.mark.parametrize(
    ("res", "expected"),
    [
        (
            {"msg": "MODULE FAILURE", "module_stderr": "/bin/sh: 1: /usr/bin/python3: not found\n", "rc": 127},
            "no Python 3 at /usr/bin/python3 (install python3 or set ansible_python_interpreter)",
        ),
        ({"msg": "No python interpreters found for host x"}, "no Python 3 found on the host"),
        ({"msg": "non-zero return code", "stderr": "pip: error: no such option\nmore"}, "non-zero return code"),
        ({"msg": "MODULE FAILURE\nSee stdout/stderr", "module_stderr": "Traceback...\nboom"}, "Traceback..."),
        ({}, "task failed"),
    ],
)
def test_failure_messages(res: dict, expected: str) -> None:
    assert failure_message(res).startswith(expected)


SMI = [
    "0, NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB, 00000000:1B:00.0",
    "1, NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB, 00000000:43:00.0",
    "",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
]


def test_nvidia_smi_rows() -> None:
    gpus = parse_nvidia_smi(SMI)
    assert gpus == [
        Gpu(0, "NVIDIA H100 80GB HBM3", "550.54.15", "81559 MiB", "00000000:1B:00.0"),
        Gpu(1, "NVIDIA H100 80GB HBM3", "550.54.15", "81559 MiB", "00000000:43:00.0"),
    ]


@pytest.mark.parametrize(
    ("facts", "flavor", "problem"),
    [
        ({"pci_gpus": [], "nvidia_smi_rc": 2, "nvidia_smi": []}, "cpu", None),
        ({"pci_gpus": ["0000:1b:00.0"], "nvidia_smi_rc": 0, "nvidia_smi": SMI[:2]}, "gpu", None),
        (
            {"pci_gpus": ["0000:1b:00.0"], "nvidia_smi_rc": 2, "nvidia_smi_error": "Error executing command."},
            None,
            "1 NVIDIA GPU(s) on the PCI bus but no nvidia-smi: is the NVIDIA driver installed?",
        ),
        (
            {"pci_gpus": ["a", "b"], "nvidia_smi_rc": 9, "nvidia_smi_error": SMI[3]},
            None,
            f"2 NVIDIA GPU(s) on the PCI bus but nvidia-smi fails: {SMI[3]}",
        ),
    ],
)
def test_flavor_from_facts(facts: dict, flavor: str | None, problem: str | None) -> None:
    assert choose_flavor(facts) == (flavor, problem)


def test_known_hosts_lines() -> None:
    keys = {"ssh-ed25519": "AAAAkey", "ssh-rsa": ""}
    assert known_hosts_lines("10.0.0.5", 22, "n1", keys) == ["10.0.0.5,n1 ssh-ed25519 AAAAkey"]
    assert known_hosts_lines("10.0.0.5", 2222, "n1", keys) == ["[10.0.0.5]:2222,[n1]:2222 ssh-ed25519 AAAAkey"]
    assert known_hosts_lines("n1", 22, "n1", keys) == ["n1 ssh-ed25519 AAAAkey"]


def test_python_mismatch() -> None:
    assert python_mismatch({"python": "3.11"}, "3.11") is None
    msg = python_mismatch({"python": "3.12"}, "3.11")
    assert msg and msg.startswith("the host has Python 3.12 and this controller builds wheels for Python 3.11")


@pytest.mark.parametrize(
    ("output", "flavor", "problem"),
    [
        # captured on this machine (no GPU, no driver)
        (["err sh: 4: nvidia-smi: not found", "rc 127"], "cpu", None),
        # an H100 host with its driver (nvidia-smi's csv rows, tagged by the probe)
        (
            ["pci 0000:17:00.0", "smi 0, NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB, 00000000:17:00.0", "rc 0"],
            "gpu",
            None,
        ),
        # the GPU is there, the driver is not loaded
        (
            [
                "pci 0000:17:00.0",
                "err NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
                "rc 9",
            ],
            None,
            "1 NVIDIA GPU(s) on the PCI bus but nvidia-smi fails: NVIDIA-SMI has failed because it couldn't "
            "communicate with the NVIDIA driver.",
        ),
        (
            ["pci 0000:17:00.0", "pci 0000:65:00.0", "err sh: 4: nvidia-smi: not found", "rc 127"],
            None,
            "2 NVIDIA GPU(s) on the PCI bus but no nvidia-smi: is the NVIDIA driver installed?",
        ),
    ],
)
def test_a_hosts_gpu_probe_gives_the_flavour_the_facts_role_would(
    output: list[str], flavor: str | None, problem: str | None
) -> None:
    """bench reads an inventory host's flavour over SSH with the facts role's probes, and the same rule."""
    from dltestbed.provision.facts import choose_flavor, parse_gpu_probe

    assert choose_flavor(parse_gpu_probe(output)) == (flavor, problem)


def test_the_gpu_probe_runs_here() -> None:
    """The probe script itself, run by sh on this machine (no NVIDIA GPU): the cpu flavour."""
    import subprocess

    from dltestbed.provision.facts import GPU_PROBE, choose_flavor, parse_gpu_probe

    out = subprocess.run(["sh", "-c", GPU_PROBE], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[-1].startswith("rc ") and choose_flavor(parse_gpu_probe(out)) == ("cpu", None)
