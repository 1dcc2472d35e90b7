"""Each block of the PyTorch models that computes its padding another way (the convolution's own padding, a pool
whose last window runs past the edge), or its conv's bias in the norm after it, holds the numbers of the block it
replaced: the explicit pad then the layer, or the conv with its bias then the norm, written out here as it was.
Forward and backward, in float64 on CPU, on inputs with negative values and sizes odd and even."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dltestbed.workload.frameworks.pytorch import models as torchmodels
from dltestbed.workload.frameworks.pytorch.layers import ConvNorm, MaxPoolSame, PointwiseConv, SamePad, conv_same
from dltestbed.workload.frameworks.pytorch.models import Bottleneck

pytestmark = pytest.mark.torch


def _same(old: Callable[[torch.Tensor], torch.Tensor], new: nn.Module, shape: tuple[int, ...]) -> None:
    """old(x) == new(x), and the gradients of the input and of every weight equal, to float64's last bit but a
    summation order's rounding."""
    torch.manual_seed(0)
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    a, b = old(x), new(x)
    assert a.shape == b.shape
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    g = torch.randn_like(a)
    (ga, *wa) = torch.autograd.grad(a, [x, *new.parameters()], g)
    (gb, *wb) = torch.autograd.grad(b, [x, *new.parameters()], g)
    for u, v in zip([ga, *wa], [gb, *wb], strict=True):
        torch.testing.assert_close(u, v, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel", [(3, 3), (5, 5), (1, 7), (7, 1), (11, 11)])
@pytest.mark.parametrize("size", [(8, 8), (17, 17), (9, 14)])
def test_a_stride_one_same_conv_pads_in_the_convolution(kernel: tuple[int, int], size: tuple[int, int]) -> None:
    new = conv_same(3, 4, kernel).double()
    assert isinstance(new, nn.Conv2d)  # no pad before it: no copy of its input
    _same(lambda x: F.conv2d(SamePad(kernel, 1)(x), new.weight, new.bias), new, (2, 3, *size))


@pytest.mark.parametrize("stride", [2, 4])
def test_a_strided_same_conv_still_pads_as_tensorflow(stride: int) -> None:
    """Its padding depends on the input's size and may be uneven: SamePad stays (AlexNet's first conv)."""
    new = conv_same(3, 4, 11, stride).double()
    conv = new[1]
    _same(lambda x: F.conv2d(SamePad((11, 11), stride)(x), conv.weight, conv.bias, stride), new, (2, 3, 30, 31))


@pytest.mark.parametrize(("kernel", "stride"), [(3, 2), (3, 1), (2, 2), (5, 3)])
@pytest.mark.parametrize("size", [(56, 56), (28, 28), (7, 7), (13, 20), (3, 4)])
def test_a_same_max_pool_equals_padding_with_minus_infinity(kernel: int, stride: int, size: tuple[int, int]) -> None:
    if min(size) < kernel and stride > 1:
        size = (size[0] + kernel, size[1] + kernel)
    pad = SamePad((kernel, kernel), stride, float("-inf"))
    _same(lambda x: F.max_pool2d(pad(x), kernel, stride), MaxPoolSame(kernel, stride), (2, 3, *size))


def test_alexnets_pools_take_the_path_without_a_copy_at_224_px() -> None:
    """224 → 56 after the first conv: each pool's input is even, so TensorFlow pads after only."""
    pools = [m for m in torchmodels.AlexNet(224, 10).modules() if isinstance(m, MaxPoolSame)]
    sides = (56, 28, 14)
    assert [p.pads_after_only(side) for p, side in zip(pools, sides, strict=True)] == [True] * len(sides)


@pytest.mark.parametrize("size", [224, 75, 64, 33])
def test_resnets_stem_equals_kerass_zero_paddings(size: int) -> None:
    """Keras: ZeroPadding2D(3), the 7×7 conv, batch norm, ReLU, ZeroPadding2D(1), the 3×3 max pool. After the ReLU
    no value is below the zero of the padding, so the pool's own padding (never picked) gives the same."""
    stem = nn.Sequential(*list(torchmodels.ResNet50(10).features)[:3]).double().train()
    conv, bn = stem[0].conv, stem[0].norm

    def old(x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(F.pad(x, (3, 3, 3, 3)), conv.weight, conv.bias, 2)
        y = F.relu(F.batch_norm(y, None, None, bn.weight, bn.bias, training=True, eps=bn.eps))
        return F.max_pool2d(F.pad(y, (1, 1, 1, 1)), 3, 2)

    _same(old, stem, (2, 3, size, size))


@pytest.mark.parametrize("stride", [1, 2])
def test_a_pointwise_conv_takes_its_pixels_first_on_a_cpu(stride: int) -> None:
    new = PointwiseConv(6, 5, stride).double()
    _same(lambda x: F.conv2d(x, new.weight, new.bias, stride), new, (2, 6, 15, 14))


@pytest.mark.parametrize(("stride", "shortcut"), [(1, False), (1, True), (2, True)])
def test_a_bottleneck_sums_in_place_as_it_summed_out_of_place(stride: int, shortcut: bool) -> None:
    """Keras's residual block: relu(shortcut + body), now summed into the body's output; its gradients too."""
    block = Bottleneck(16 if shortcut else 32, 8, stride, conv_shortcut=shortcut).double().train()

    def old(x: torch.Tensor) -> torch.Tensor:
        short = x if block.shortcut is None else block.shortcut(x)
        return F.relu(short + block.body(x))

    _same(old, block, (2, 16 if shortcut else 32, 9, 10))


def test_harness_fidelity_compares_with_a_resnet_written_outside_and_the_report_sets_the_bench_against_it(
    tmp_path: Path,
) -> None:
    """bench/harness_fidelity.py's second baseline runs here: transformers' ResNet-50 (torchvision does not import
    beside the CPU torch), each side's FLOPs counted, both ratios printed; the outside loop stored beside the
    bench's run, and the report's group table sets the run against it."""
    script = Path(__file__).parents[2] / "bench" / "harness_fidelity.py"
    results = tmp_path / "r.sqlite"
    args = ["--framework", "pytorch", "--model", "resnet50", "--image-size", "32", "--batch-size", "2"]
    args += ["--warmup", "1", "--steps", "1", "--pairs", "1", "--results", str(results)]
    out = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    report = subprocess.run(
        [sys.executable, "-m", "dltestbed", "report", "--results", str(results)], capture_output=True, text=True
    )
    assert report.returncode == 0, report.stderr
    row = next(line for line in report.stdout.splitlines() if line.startswith("| bm "))
    assert "against reference" in report.stdout and "(transformers " in row and row.count("| bm ") == 1, row
    assert "outside" in out.stdout and "transformers" in out.stdout, out.stdout
    flops = re.search(r"FLOPs per image \(forward\): dltestbed ([\d.]+) G, outside ([\d.]+) G", out.stdout)
    assert flops is not None and 0 < float(flops[1]) < float(flops[2]), out.stdout  # v1 strides its 1×1: fewer
    assert "model efficiency (dltestbed ÷ outside, img/s)" in out.stdout
    assert "FLOP-normalised efficiency (dltestbed ÷ outside, FLOP/s)" in out.stdout


CONVS = {
    "1x1": lambda: PointwiseConv(6, 5),
    "strided 1x1": lambda: PointwiseConv(6, 5, 2),
    "3x3 same": lambda: conv_same(6, 5, 3),
    "stem 7x7": lambda: nn.Conv2d(6, 5, 7, stride=2, padding=3),
}


@pytest.mark.parametrize("make", CONVS.values(), ids=CONVS.keys())
def test_a_convs_bias_folded_into_its_norm_holds_the_pairs_numbers_and_state(make: Callable[[], nn.Module]) -> None:
    """ConvNorm against the conv with its bias then the norm (ResNet-50's pair): two training steps' outputs, every
    gradient, the running mean and variance and the batches counted; then eval's output. The bias's gradient is
    zero in both (the pair's to rounding)."""
    torch.manual_seed(1)
    conv = make().double()
    with torch.no_grad():
        conv.bias.uniform_(-2.0, 2.0)  # a bias far from zero: were it dropped, the norm's state would show it
    pair = nn.Sequential(conv, torchmodels._bn(5).double()).train()
    fold = ConvNorm(copy.deepcopy(conv), copy.deepcopy(pair[1])).train()
    for _ in range(2):
        x = torch.randn(3, 6, 11, 12, dtype=torch.float64, requires_grad=True)
        a, b = pair(x), fold(x)
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
        g = torch.randn_like(a)
        ga = torch.autograd.grad(a, [x, *pair.parameters()], g)
        gb = torch.autograd.grad(b, [x, *fold.parameters()], g)
        for u, v in zip(ga, gb, strict=True):
            torch.testing.assert_close(u, v, rtol=1e-10, atol=1e-10)
        assert torch.equal(gb[2], torch.zeros(5, dtype=torch.float64))  # the conv's bias: exactly zero
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(pair[1], name), getattr(fold.norm, name), rtol=1e-12, atol=1e-12)
    assert fold.state_dict().keys() != pair.state_dict().keys() and len(fold.state_dict()) == len(pair.state_dict())
    x = torch.randn(2, 6, 9, 8, dtype=torch.float64)
    torch.testing.assert_close(pair.eval()(x), fold.eval()(x), rtol=1e-12, atol=1e-12)


def test_a_folded_bias_is_a_used_parameter_in_a_ddp_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DDP refuses a step in which a parameter had no gradient: the folded bias is in the graph (times zero)."""
    import torch.distributed as dist

    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        model = nn.parallel.DistributedDataParallel(Bottleneck(8, 4, 2, conv_shortcut=True).train())
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        for _ in range(3):  # an unused parameter fails the second step
            opt.zero_grad()
            model(torch.randn(2, 8, 9, 9)).sum().backward()
            opt.step()
        biases = [m.conv.bias for m in model.modules() if isinstance(m, ConvNorm)]
        assert len(biases) == 4 and all(b.grad is not None and not b.grad.any() for b in biases)
    finally:
        dist.destroy_process_group()
