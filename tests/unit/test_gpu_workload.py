"""The workload's GPU decisions without a GPU: the math a run uses, why it failed, which CUDA libraries it loaded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dltestbed.errors import ConfigError
from dltestbed.workload import failure, fingerprint, mathmode
from tests.plans import plan_of

H100_DATA = Path(__file__).parents[1] / "data" / "gpu" / "h100"
ERRORS = json.loads((Path(__file__).parents[1] / "data" / "tf_errors" / "captured.json").read_text())
# The shape of TensorFlow's GPU allocation failures (the H100's foreground beside a co-tenant holding the GPU
# failed with these kinds; the texts follow TensorFlow 2.21's format, as the CPU captures above show it).
GPU_OOM = (
    "Graph execution error:\n\nDetected at node resnet50_1/conv1_conv_1/convolution defined at (most recent "
    'call last):\n  File "<frozen runpy>", line 198, in _run_module_as_main\n\n  File "/x/loop.py", line '
    "51, in train_step\n\nOOM when allocating tensor with shape[32,64,112,112] and type float on "
    "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n\t [[{{node resnet50_1/conv1_conv_1/"
    "convolution}}]]\nHint: If you want to see a list of allocated tensors when OOM happens, add "
    "report_tensor_allocations_upon_oom to RunOptions for current allocation info.\n [Op:__inference_train_"
    "step_9876]"
)
CUDNN_OOM = (
    "Graph execution error:\n\nDetected at node resnet50_1/conv1_conv_1/convolution defined at (most recent "
    'call last):\n  File "/x/loop.py", line 51, in train_step\n\nNo algorithm worked!  Error messages:\n  '
    "Profiling failure on CUDNN engine eng0{}: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
    "4563402752 bytes.\n\t [[{{node resnet50_1/conv1_conv_1/convolution}}]] [Op:__inference_train_step_"
    "9876]"
)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (ERRORS["invalid_argument_gather"][1], "indices[0] = 10 is not in [0, 3)"),
        (
            ERRORS["oom_cpu"][1],
            "OOM when allocating tensor with shape[2147483648,2] and type float on "
            "/job:localhost/replica:0/task:0/device:CPU:0 by allocator mklcpu",
        ),
        (
            GPU_OOM,
            "OOM when allocating tensor with shape[32,64,112,112] and type float on "
            "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
        ),
        (
            CUDNN_OOM,
            "No algorithm worked! Error messages: Profiling failure on CUDNN engine eng0{}: RESOURCE_EXHAUSTED: "
            "Out of memory while trying to allocate 4563402752 bytes.",
        ),
        ("plain message\nsecond line", "plain message"),
        (
            "OOM when allocating tensor with shape[65536,224,224,3] and type float on /job:localhost/replica:0/task:0"
            "/device:CPU:0 by allocator mklcpu [Op:StatelessRandomUniformV2] name: ",
            "OOM when allocating tensor with shape[65536,"
            "224,224,3] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator mklcpu",
        ),
    ],
)
def test_the_stored_reason_is_the_line_that_says_what_went_wrong(text: str, line: str) -> None:
    """Not "Graph execution error:" (what the H100's failed runs stored), nor the traceback or the hint."""
    assert failure.error_line(text) == line


def test_out_of_memory_is_told_from_other_errors_and_the_gpus_from_the_host() -> None:
    assert failure.out_of_memory(GPU_OOM) and failure.on_gpu(GPU_OOM)
    assert failure.out_of_memory(CUDNN_OOM) and failure.on_gpu(CUDNN_OOM)
    assert failure.out_of_memory(ERRORS["oom_cpu"][1]) and not failure.on_gpu(ERRORS["oom_cpu"][1])
    assert not failure.out_of_memory(ERRORS["invalid_argument_gather"][1])


def test_who_held_the_gpu_is_named_with_what_it_held() -> None:
    devices = [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 80 << 30},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 80 << 30},
    ]
    cmd = "python3 -m dltestbed.workload --model alexnet"
    procs = [
        {"index": 0, "pid": 10, "used_bytes": 77 << 30, "command": cmd},
        {"index": 0, "pid": 11, "used_bytes": 1 << 30, "command": None},
        {"index": 0, "pid": 99, "used_bytes": 2 << 30, "command": "me"},
    ]
    assert failure.holders(devices, procs, me=99) == (
        "GPU 0 (NVIDIA H100 80GB HBM3): 78.0 GiB of 80.0 GiB held by pid 10 python3 -m dltestbed.workload --model "
        "alexnet 77.0 GiB, pid 11 (not visible from here) 1.0 GiB; GPU 1 (NVIDIA H100 80GB HBM3): no other process "
        "holds memory there"
    )


def test_an_out_of_memory_reason_names_the_other_process_through_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole path of a failed GPU run's reason, NVML being the H100 fake with a co-tenant on it."""
    import sys

    from dltestbed.workload.__main__ import describe
    from tests import fakenvml

    other = os.getppid()  # a process this one can see: its command line is named
    fake = fakenvml.h100(processes=((0, other, 70 << 30), (0, os.getpid(), 1 << 30)))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    text = describe(RuntimeError(GPU_OOM), limit_mib=4096)
    assert text.startswith(
        "out of GPU memory (this run's limit: 4096 MiB, --gpu-memory-mib): OOM when allocating "
        "tensor with shape[32,64,112,112]"
    )
    assert f"70.0 GiB of 79.6 GiB held by pid {other} " in text and "\n" not in text
    assert describe(RuntimeError(ERRORS["invalid_argument_gather"][1]), None) == "indices[0] = 10 is not in [0, 3)"


@pytest.mark.parametrize(
    ("asked", "ccs", "used"),
    [
        ("mixed", [(9, 0)], "mixed_bfloat16"),
        ("mixed", [(7, 0)], "mixed_float16"),
        ("mixed", [], "mixed_bfloat16"),
        ("mixed", [(9, 0), (7, 5)], "mixed_float16"),
        ("tf32", [(8, 0)], "tf32"),
        ("float32", [], "float32"),
        ("mixed_float16", [(7, 0)], "mixed_float16"),
        ("mixed_bfloat16", [], "mixed_bfloat16"),
    ],
)
def test_the_math_a_run_uses(asked: str, ccs: list[tuple[int, int]], used: str) -> None:
    assert mathmode.resolve(asked, ccs) == used


@pytest.mark.parametrize(
    ("asked", "ccs", "message"),
    [
        ("tf32", [], "--math tf32 needs a GPU with tensor cores (Ampere or later); this run has none: use float32"),
        ("tf32", [(7, 0)], "--math tf32: this GPU (compute capability 7.0) has no tf32 tensor cores"),
        ("mixed_bfloat16", [(7, 5)], "--math mixed_bfloat16: this GPU (compute capability 7.5) has no bfloat16 tensor"),
    ],
)
def test_a_math_the_device_lacks_is_refused_not_silently_replaced(
    asked: str, ccs: list[tuple[int, int]], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        mathmode.resolve(asked, ccs)
    assert str(err.value).startswith(message)


MAPS = """7f2a00000000-7f2a00200000 r-xp 00000000 08:01 131 /opt/v/nvidia/cuda_runtime/lib/libcudart.so.12
7f2a10000000-7f2a18000000 r-xp 00000000 08:01 132 /opt/v/nvidia/cublas/lib/libcublasLt.so.12
7f2a20000000-7f2a28000000 r-xp 00000000 08:01 133 /opt/v/nvidia/cublas/lib/libcublas.so.12
7f2a30000000-7f2a30100000 r-xp 00000000 08:01 134 /opt/v/nvidia/cudnn/lib/libcudnn_graph.so.9
7f2a40000000-7f2a40100000 r-xp 00000000 08:01 135 /opt/v/nvidia/cudnn/lib/libcudnn.so.9
7f2a50000000-7f2a50001000 rw-p 00000000 00:00 0
7f2a60000000-7f2a60100000 r-xp 00000000 08:01 136 /usr/lib/x86_64-linux-gnu/libc.so.6
"""


def test_the_loaded_cuda_libraries_are_found_in_the_process_map() -> None:
    assert fingerprint.loaded_paths(MAPS) == {
        "cuda_runtime": "/opt/v/nvidia/cuda_runtime/lib/libcudart.so.12",
        "cublas": "/opt/v/nvidia/cublas/lib/libcublas.so.12",
        "cudnn": "/opt/v/nvidia/cudnn/lib/libcudnn.so.9",
    }


@pytest.mark.parametrize(
    ("key", "number", "text"),
    [
        ("cuda_runtime", 12090, "12.9"),
        ("cuda_runtime", 12050, "12.5"),
        ("cuda_runtime", 13000, "13.0"),
        ("cudnn", 92800, "9.28.0"),
        ("cudnn", 90100, "9.1.0"),
        ("cudnn", 8907, "8.9.7"),
        ("cudnn", 8600, "8.6.0"),
    ],
)
def test_cuda_version_numbers_read_as_their_vendor_writes_them(key: str, number: int, text: str) -> None:
    assert fingerprint.version_text(key, number) == text


def test_this_cpu_process_has_no_cuda_loaded() -> None:
    assert fingerprint.loaded_cuda() == {}


def test_the_preset_follows_this_machines_gpus() -> None:
    """The captured H100's nvidia-smi query, parsed as bench parses it, makes --preset auto choose gpu."""
    from dltestbed.orchestrate import presets
    from dltestbed.provision.facts import parse_nvidia_smi

    names = [g.name for g in parse_nvidia_smi((H100_DATA / "query.csv").read_text().splitlines())]
    assert presets.auto_preset(names) == (
        "gpu",
        "--preset auto: gpu, for this machine's NVIDIA H100 80GB HBM3 (1 GPU(s))",
    )
    assert presets.auto_preset([]) == ("quick", "--preset auto: quick (this machine has no GPU TensorFlow can use)")
    assert presets.auto_preset(None) == ("quick", "--preset auto: quick (not on this machine)")


def test_the_gpu_preset_is_what_a_gpu_owner_runs() -> None:

    plan = plan_of(preset_name="gpu")
    got = {s.model: (s.size, s.batch_size, s.math, s.xla, s.warmup, s.steps) for s in plan.specs}  # type: ignore[union-attr]
    assert got == {
        "alexnet": (224, 512, "mixed", True, None, 200),  # warm-up until steady
        "resnet50": (224, 256, "mixed", True, None, 200),
        "inception3": (299, 256, "mixed", True, None, 200),
    }
    study = plan_of(preset_name="study", math="tf32", xla=False, batch_size=64)
    assert {(s.math, s.xla, s.batch_size) for s in study.specs} == {("tf32", False, 64)}  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="--math and --xla go with --suite study or full"):
        plan_of(suite="micro", math="tf32")
    with pytest.raises(ConfigError, match="--math tf32 is a GPU's"):
        plan_of(preset_name="quick", math="tf32", device="cpu")


def test_a_deterministic_gpu_run_trains_without_xla_and_the_gpu_probes_at_full_size() -> None:
    """What the H100 showed (2026-11-26): the gpu preset's XLA failed every deterministic training at step 0
    (no deterministic XLA max-pool gradient), and its probes at small sizes (n=256/512 GEMMs) reached 0-5 % of
    the GPU's peaks. The preset's XLA is left out where a run is deterministic (the screen's too), an XLA asked
    for is refused before any run, and the gpu preset's probes run at full size unless --probe-scale says."""
    from dltestbed.config import ProbeSpec, WorkloadSpec

    det = plan_of(preset_name="gpu", models=["resnet50"], deterministic=True)
    assert [(s.xla, s.math, s.deterministic) for s in det.specs] == [(False, "mixed", True)]  # type: ignore[union-attr]
    screen = plan_of(preset_name="gpu", suite="screen", screen_seconds=5.0)
    assert [s.xla for s in screen.specs if isinstance(s, WorkloadSpec)] == [False]
    with pytest.raises(ConfigError, match="--deterministic trains without XLA"):
        plan_of(preset_name="gpu", models=["resnet50"], deterministic=True, xla=True)
    infer = plan_of(preset_name="gpu", models=["resnet50"], deterministic=True, xla=True, mode="infer")
    assert [s.xla for s in infer.specs] == [True]  # type: ignore[union-attr]  # no gradient: XLA may stay

    def scale(**kw: object) -> str:
        (probe,) = [s for s in plan_of(suite="full", **kw).specs if isinstance(s, ProbeSpec)]  # type: ignore[arg-type]
        return probe.scale

    assert (scale(preset_name="gpu"), scale(preset_name="quick")) == ("full", "small")
    assert scale(preset_name="gpu", probe_scale="small") == "small"
