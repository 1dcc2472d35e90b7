"""NVML sampling against a fake pynvml (no GPU can exist here). The fake fails closed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from dltestbed.workload import gpu
from dltestbed.workload.gpu import Nvml
from tests import fakenvml


def test_devices_and_samples_from_the_captured_h100(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What a fingerprint records of a GPU, read through NVML from the H100 captured on a real machine: the
    facts an acceptance test checks (PCIe link current and max, power limit, ECC, MIG, clocks, VBIOS)."""
    fake = fakenvml.h100(processes=((0, 4242, 3 << 30), (0, 4243, 1 << 30)), util=87)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    nvml = Nvml.open()
    assert nvml is not None
    (dev,) = nvml.devices()
    assert dev == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "driver": "580.159.04",
        "cuda_driver": "13.0",
        "memory_total_bytes": 81559 << 20,
        "pci_bus_id": "00000000:00:06.0",
        "uuid": "GPU-00000000-1111-2222-3333-444444444444",
        "vbios": "96.00.DA.00.0C",
        "compute_capability": "9.0",
        "pcie_gen": 5,
        "pcie_gen_max": 5,
        "pcie_width": 16,
        "pcie_width_max": 16,
        "power_limit_watts": 700.0,
        "ecc": "enabled",
        "mig": "disabled",
        "sm_clock_app_mhz": 1980,
        "mem_clock_app_mhz": 2619,
        "sm_clock_max_mhz": 1980,
        "mem_clock_max_mhz": 2619,
        "numa_node": gpu.numa_node("00000000:00:06.0"),
    }
    (s,) = nvml.sample(pid=4242)
    assert s == {
        "index": 0,
        "memory_used_bytes": 0,
        "process_memory_bytes": 3 << 30,
        "util_percent": 87.0,
        "mem_util_percent": 0.0,
        "sm_clock_mhz": 345,  # idle: the capture's own clocks, power and temperature
        "mem_clock_mhz": 2619,
        "power_watts": 70.46,
        "power_limit_watts": 700.0,
        "temperature_c": 40,
        "clock_reasons": 0x1,  # Idle
        "pcie_gen": 5,
        "pcie_width": 16,
        "pcie_tx_bytes_per_s": 1007 * 1024,
        "pcie_rx_bytes_per_s": 628 * 1024,
    }
    assert [(p["pid"], p["used_bytes"]) for p in nvml.processes()] == [(4242, 3 << 30), (4243, 1 << 30)]
    nvml.close()


def test_a_fact_the_gpu_does_not_report_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """N/A in nvidia-smi is NVMLError_NotSupported in NVML: the fact is None, the others stay."""
    text = (fakenvml.H100 / "nvidia-smi-q.txt").read_text()
    text = text.replace(
        "Current Power Limit                            : 700.00 W",
        "Current Power Limit                            : N/A",
    )
    monkeypatch.setitem(sys.modules, "pynvml", fakenvml.FakeNvml(text))
    nvml = Nvml.open()
    assert nvml is not None
    (dev,) = nvml.devices()
    assert dev["power_limit_watts"] is None and dev["pcie_gen"] == 5


def test_the_numa_node_minus_one_is_unknown_not_zero(tmp_path: Path) -> None:
    for bus, value, want in (("0000:3b:00.0", "1\n", 1), ("0000:00:06.0", "-1\n", None), ("0000:5e:00.0", "0", 0)):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "numa_node").write_text(value)
        assert gpu.numa_node("0000" + bus.upper(), tmp_path) == want
    assert gpu.numa_node("00000000:AF:00.0", tmp_path) is None  # not in sysfs at all


def test_the_fake_fails_closed() -> None:
    with pytest.raises(AttributeError, match="does not implement nvmlDeviceGetFanSpeed"):
        fakenvml.h100().nvmlDeviceGetFanSpeed(0)


def test_no_nvml_means_no_gpu_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    assert Nvml.open() is None


class FakeResult:
    """A step's result on a device: only what the loop reads (its device, its value); nothing else."""

    def __init__(self, device: str) -> None:
        self.device = device

    def __float__(self) -> float:
        return 1.0

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"fake step result does not implement {name}")


@pytest.mark.parametrize(
    ("device", "require_gpu", "steps_run", "error"),
    [
        ("/job:localhost/replica:0/task:0/device:GPU:0", True, 3, None),
        ("/job:localhost/replica:0/task:0/device:CPU:0", False, 3, None),
        (
            "/job:localhost/replica:0/task:0/device:CPU:0",
            True,
            1,
            "--device gpu: the first step ran on /job:localhost/replica:0/task:0/device:CPU:0, not a GPU",
        ),
    ],
)
def test_the_first_step_says_its_device_and_device_gpu_needs_one(
    device: str, require_gpu: bool, steps_run: int, error: str | None
) -> None:
    """The GPU run path up to where a real GPU is needed: the first step's event carries the device its result
    is on (what the report calls the effective device); --device gpu ends the run after a step not on a GPU."""
    from dltestbed.errors import ConfigError
    from dltestbed.workload import loop
    from dltestbed.workload.events import encode, parse_line

    events: list[Any] = []
    step = lambda images, labels: FakeResult(device)  # noqa: E731
    batches = iter([(None, None)] * 3)
    if error:
        with pytest.raises(ConfigError) as err:
            loop.run(step, batches, 8, 1, 2, events.append, require_gpu=require_gpu)
        assert str(err.value) == error
    else:
        loop.run(step, batches, 8, 1, 2, events.append, require_gpu=require_gpu)
    assert len(events) == steps_run and events[0].device == device and all(e.device is None for e in events[1:])
    assert parse_line(encode(events[0])) == events[0]  # the device goes through the workload's stdout
    assert '"device"' not in encode(events[-1]) or steps_run == 1


def test_a_run_shorter_than_the_interval_has_a_sample_at_its_start_and_its_end() -> None:
    """The memory figure draws a run from two samples at least: the sampler says one when it starts."""
    from dltestbed.workload.sampler import Sampler

    got: list[Any] = []
    sampler = Sampler(got.append, 60.0, None, lambda: [5 << 20])
    sampler.start()
    sampler.stop()
    assert len(got) == 2 and got[0].t <= got[1].t and all(s.tf_gpu_bytes == [5 << 20] for s in got)
    assert all(s.rss_bytes > 0 and s.gpus == [] for s in got)
