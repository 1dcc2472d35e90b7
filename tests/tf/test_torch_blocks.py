"""Each block of the PyTorch models that computes its padding another way (the convolution's own padding, a pool
whose last window runs past the edge) holds the numbers of the block it replaced: the explicit pad then the
layer, written out here as it was. Forward and backward, in float64 on CPU, on inputs with negative values and
sizes odd and even."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dltestbed.workload.frameworks import torchmodels
from dltestbed.workload.frameworks.torchmodels import Bottleneck, MaxPoolSame, PointwiseConv, SamePad, conv_same

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
    stem = nn.Sequential(*list(torchmodels.ResNet50(10).features)[:4]).double().train()
    conv, bn = stem[0], stem[1]

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


def test_harness_fidelity_compares_with_a_resnet_written_outside() -> None:
    """bench/harness_fidelity.py's second baseline runs here: transformers' ResNet-50 (torchvision does not import
    beside the CPU torch), each side's FLOPs counted, both ratios printed."""
    script = Path(__file__).parents[2] / "bench" / "harness_fidelity.py"
    args = ["--framework", "pytorch", "--model", "resnet50", "--image-size", "32", "--batch-size", "2"]
    args += ["--warmup", "1", "--steps", "1", "--pairs", "1", "--no-harness"]
    out = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "outside" in out.stdout and "transformers" in out.stdout, out.stdout
    flops = re.search(r"FLOPs per image \(forward\): dltestbed ([\d.]+) G, outside ([\d.]+) G", out.stdout)
    assert flops is not None and 0 < float(flops[1]) < float(flops[2]), out.stdout  # v1 strides its 1×1: fewer
    assert "model efficiency (dltestbed ÷ outside, img/s)" in out.stdout
    assert "FLOP-normalised efficiency (dltestbed ÷ outside, FLOP/s)" in out.stdout
