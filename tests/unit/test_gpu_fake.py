"""NVML sampling against a fake pynvml (no GPU can exist here). The fake fails closed."""

from __future__ import annotations

import sys
import time
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
    from dltestbed.workload.codec import encode, parse_line

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
    assert len(got) == 2 and got[0].t <= got[1].t and all(s.gpu_bytes == [5 << 20] for s in got)
    assert all(s.rss_bytes > 0 and s.gpus == [] for s in got)


def test_a_gpu_a_cgroup_denies_leaves_the_others_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slurm's device cgroup lets a job open GPUs 0, 2 and 3 of 4: NVML still counts 4 and says NO_PERMISSION
    for GPU 1. The three are read, sampled, checked and watched under their NVML index; GPU 1 is named as
    denied, not taken as "no GPU"."""
    fake = fakenvml.FakeNvml(fakenvml.several(fakenvml.h100_text(), 4), denied=(1,))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    nvml = Nvml.open()
    assert nvml is not None and nvml.denied == {1: "Insufficient Permissions"}
    assert [(d["index"], d["pci_bus_id"]) for d in nvml.devices()] == [
        (0, "00000000:00:06.0"),
        (2, "00000000:00:08.0"),
        (3, "00000000:00:09.0"),
    ]
    assert [s["index"] for s in nvml.sample(pid=1)] == [0, 2, 3]
    gpus, unseen = nvml.health()
    assert [g["index"] for g in gpus] == [0, 2, 3] and unseen == []
    watch = nvml.watch_xids()
    assert fake.event_sets[-1] == [0, 2, 3]
    watch.stop()
    fake.denied = (0, 1, 2, 3)  # a process that may open none: no GPU to read
    assert Nvml.open() is None


def test_a_mig_gpu_is_sampled_for_what_it_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """MIG enabled: utilisation is not supported and listing processes needs privileges. A sample leaves both
    out instead of raising before step 0."""
    from dltestbed.workload.sampler import Sampler

    fake = fakenvml.FakeNvml(fakenvml.h100_text(), mig=True)
    (s,) = Nvml(fake).sample(pid=1)
    assert "util_percent" not in s and "process_memory_bytes" not in s
    assert s["memory_used_bytes"] == 0 and s["clock_reasons"] == 0x1
    seen: list[Any] = []
    sampler = Sampler(seen.append, 60.0, Nvml(fake))
    with sampler.running():
        pass
    assert len(seen) == 2 and sampler.unseen == []


def test_memory_used_leaves_out_what_the_driver_reserves_where_it_can() -> None:
    """NVML's v1 memory info counts the driver's reservation (480 MiB on the idle H100) as used; v2 (R510
    on) does not. An older driver still answers, through v1."""
    (new,) = Nvml(fakenvml.h100()).sample(pid=1)
    (old,) = Nvml(fakenvml.FakeNvml(fakenvml.h100_text(), driver_branch=470)).sample(pid=1)
    assert (new["memory_used_bytes"], old["memory_used_bytes"]) == (0, 480 << 20)


class _Breaks:
    """An Nvml whose samples fail after the first, as when a GPU falls off the bus mid-run."""

    def __init__(self) -> None:
        self.calls = 0

    def sample(self) -> list[dict[str, Any]]:
        self.calls += 1
        if self.calls > 1:
            raise RuntimeError("GPU is lost")
        return [{"index": 0, "util_percent": 50.0}]


def test_a_gpu_read_that_fails_mid_run_ends_the_gpu_samples_not_the_run() -> None:
    """The sampler's thread would die silently, and its last sample would raise over the run's own error: the
    CPU samples go on, and why the GPU's stopped is kept for the run's health check."""
    from dltestbed.workload.sampler import Sampler

    seen: list[Any] = []
    broken = _Breaks()
    sampler = Sampler(seen.append, 0.01, broken)  # type: ignore[arg-type]
    with sampler.running():
        time.sleep(0.1)
    assert seen[0].gpus and all(not s.gpus for s in seen[1:]) and len(seen) >= 3
    assert broken.calls == 2  # asked once more, then never again
    assert sampler.unseen == ["GPU samples: stopped (RuntimeError: GPU is lost)"]


def test_each_cuda_device_gets_its_own_nvml_facts_by_pci_bus_id() -> None:
    """NVML's order may differ from CUDA's, and CUDA_VISIBLE_DEVICES (Slurm's) renumbers CUDA's: GPU 0 of a job
    given the node's GPUs 3 and 1 is NVML's GPU 3, by its bus id, whatever the domain's width or the case."""
    devices = Nvml(fakenvml.FakeNvml(fakenvml.several(fakenvml.h100_text(), 4))).devices()
    got = gpu.in_cuda_order(devices, ["0000:00:09.0", "0000:00:07.0\0"])
    assert [(d["index"], d["uuid"][-2:]) for d in got] == [(3, "03"), (1, "01")]
    assert gpu.in_cuda_order(devices, ["0000:AF:00.0"]) == [{}]  # one NVML does not list: unknown, never another's
    assert gpu.bus_key("00000000:3B:00.0") == gpu.bus_key("0000:3b:00.0") == "0000:3b:00.0"


def test_without_the_cuda_runtime_nvml_order_is_used_only_where_nothing_reorders_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dltestbed.workload import cudart, probes, screen
    from dltestbed.workload.micro import _in_tf_order

    def no_runtime() -> list[str]:
        raise cudart.CudaError("NVIDIA's cuda-bindings is not installed")

    monkeypatch.setattr(cudart, "pci_bus_ids", no_runtime)
    devices = Nvml(fakenvml.FakeNvml(fakenvml.several(fakenvml.h100_text(), 2))).devices()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert _in_tf_order(devices, 2) == devices
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert _in_tf_order(devices, 1) == [{}]
    monkeypatch.setattr(cudart, "pci_bus_ids", lambda: ["0000:00:07.0"])
    (facts,) = _in_tf_order(devices, 1)
    assert facts["index"] == 1
    # the screen and the probes name TensorFlow's /GPU:0 as its health does: NVML's GPU 1
    from dltestbed.workload.frameworks.tensorflow import checks

    w = probes.Where(None, (str(facts["name"]),), "small", (), 0, gpu_facts=(facts,), checks=checks)
    assert screen.devices(w) == [("/GPU:0", 1)] and w.gpu == 1


class _FakeRuntime:
    """cuda.bindings.runtime as far as the copy probe calls it: every call recorded, each answering success.
    Fails closed: a call it does not serve raises AttributeError."""

    class cudaMemcpyKind:  # cuda-bindings' name
        cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice = 1, 2, 3

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name not in {"cudaSetDevice", "cudaMalloc", "cudaFree", "cudaMallocHost", "cudaFreeHost", "cudaMemcpy",
                        "cudaMemcpyAsync", "cudaStreamCreate", "cudaStreamDestroy", "cudaStreamSynchronize",
                        "cudaDeviceSynchronize"}:  # fmt: skip
            raise AttributeError(name)
        return lambda *args: (self.calls.append(name), 0, 1)[1:]


@pytest.mark.parametrize(("pinned", "copy", "wait"), [(True, "cudaMemcpyAsync", "cudaStreamSynchronize"),
                                                      (False, "cudaMemcpy", "cudaDeviceSynchronize")])  # fmt: skip
def test_a_timed_copy_waits_for_its_last_transfer(
    monkeypatch: pytest.MonkeyPatch, pinned: bool, copy: str, wait: str
) -> None:
    """A pageable cudaMemcpy runs on the default stream and may return before its last DMA ends: the copies are
    timed to the device's synchronisation, not to a stream they never used."""
    from dltestbed.workload import cudart

    rt = _FakeRuntime()
    monkeypatch.setattr(cudart, "runtime", lambda: rt)
    copies = cudart.Copies(0, 4096, "h2d", pinned, None)
    rt.calls.clear()
    copies(3)
    assert rt.calls == [copy] * 3 + [wait]
    copies.close()


def test_a_device_copy_is_two_buffers_on_a_stream_and_waits_for_its_last_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU's memory bandwidth: copies between two device buffers on one stream, timed to the stream's end;
    closed, every buffer and the stream are freed once."""
    from dltestbed.workload import cudart

    rt = _FakeRuntime()
    monkeypatch.setattr(cudart, "runtime", lambda: rt)
    copies = cudart.DeviceCopies(0, 4096)
    assert rt.calls == ["cudaSetDevice", "cudaMalloc", "cudaMalloc", "cudaStreamCreate"]
    rt.calls.clear()
    copies(3)
    assert rt.calls == ["cudaMemcpyAsync"] * 3 + ["cudaStreamSynchronize"]
    rt.calls.clear()
    copies.close()
    copies.close()
    assert sorted(rt.calls) == ["cudaFree", "cudaFree", "cudaStreamDestroy"]


def test_the_peak_memory_is_measured_after_warm_up() -> None:
    from dltestbed.workload import loop

    seen: list[str] = []
    steps = iter([(None, None)] * 5)
    loop.run(
        lambda x, y: (seen.append("step"), 1.0)[1], steps, 2, 2, 3, lambda ev: None, warmed=lambda: seen.append("reset")
    )
    assert seen == ["step", "step", "reset", "step", "step", "step"]
