"""NVML sampling against a fake pynvml (no GPU can exist here). The fake fails closed."""

from __future__ import annotations

import types
from typing import Any

import pytest

from dltestbed.workload.gpu import Nvml


class FakeNvml(types.ModuleType):
    """Implements the NVML calls dltestbed uses for one fake GPU; anything else raises."""

    KNOWN = frozenset({"nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex",
             "nvmlSystemGetDriverVersion", "nvmlDeviceGetName", "nvmlDeviceGetMemoryInfo",
             "nvmlDeviceGetPciInfo", "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetComputeRunningProcesses",
             "NVMLError"})  # fmt: skip

    def __init__(self, pid: int) -> None:
        super().__init__("pynvml")
        self.pid = pid
        self.NVMLError = type("NVMLError", (Exception,), {})

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"fake NVML does not implement {name}")

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        if i != 0:
            raise self.NVMLError("invalid index")
        return "gpu0"

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"550.54.15"

    def nvmlDeviceGetName(self, h: str) -> str:
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetMemoryInfo(self, h: str) -> Any:
        return types.SimpleNamespace(total=80 << 30, used=5 << 30)

    def nvmlDeviceGetPciInfo(self, h: str) -> Any:
        return types.SimpleNamespace(busId=b"00000000:3B:00.0")

    def nvmlDeviceGetUtilizationRates(self, h: str) -> Any:
        return types.SimpleNamespace(gpu=87)

    def nvmlDeviceGetComputeRunningProcesses(self, h: str) -> list:
        return [types.SimpleNamespace(pid=self.pid, usedGpuMemory=3 << 30),
                types.SimpleNamespace(pid=self.pid + 1, usedGpuMemory=1 << 30)]  # fmt: skip


def test_devices_and_samples_from_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml(pid=4242)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake)
    nvml = Nvml.open()
    assert nvml is not None
    (dev,) = nvml.devices()
    assert dev == {"index": 0, "name": "NVIDIA H100 80GB HBM3", "driver": "550.54.15",
                   "memory_total_bytes": 80 << 30, "pci_bus_id": "00000000:3B:00.0"}  # fmt: skip
    (s,) = nvml.sample(pid=4242)
    assert s == {
        "index": 0,
        "memory_used_bytes": 5 << 30,
        "process_memory_bytes": 3 << 30,
        "util_percent": 87.0,
    }
    nvml.close()


def test_the_fake_fails_closed() -> None:
    with pytest.raises(AttributeError, match="does not implement nvmlDeviceGetTemperature"):
        FakeNvml(1).nvmlDeviceGetTemperature("gpu0", 0)


def test_no_nvml_means_no_gpu_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # import fails
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
        ("/job:localhost/replica:0/task:0/device:CPU:0", True, 1,
         "--device gpu: the first step ran on /job:localhost/replica:0/task:0/device:CPU:0, not a GPU"),
    ],
)  # fmt: skip
def test_the_first_step_says_its_device_and_device_gpu_needs_one(device: str, require_gpu: bool, steps_run: int,
                                                                 error: str | None) -> None:  # fmt: skip
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
