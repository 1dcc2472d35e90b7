"""The layers the PyTorch models are built of where PyTorch has none that computes as Keras's does: TensorFlow's
'same' padding (with a stride, the extra row and column go after), max pools that ignore their padding, 3×3 average
pools over the valid pixels only, a batch norm with a learned shift and no scale (Keras's `scale=False`); and two
that give the same numbers faster: a strided 1×1 convolution on a CPU, and a convolution's bias folded into the
batch norm after it (tests/tf/test_torch_blocks.py holds each to the block it replaced)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

KERAS_MOMENTUM = 0.01  # Keras's BatchNormalization momentum 0.99, as PyTorch counts it


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow's 'same' padding of one dimension (before, after): the output is ceil(size / stride)."""
    total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class SamePad(nn.Module):
    """Pads an NCHW tensor as TensorFlow's 'same' would for this kernel and stride (`value`: -inf before a
    max pool, which then never picks the padding)."""

    def __init__(self, kernel: tuple[int, int], stride: int, value: float = 0.0) -> None:
        super().__init__()
        self.kernel, self.stride, self.value = kernel, stride, value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        top, bottom = same_padding(x.shape[-2], self.kernel[0], self.stride)
        left, right = same_padding(x.shape[-1], self.kernel[1], self.stride)
        if not (top or bottom or left or right):
            return x
        return F.pad(x, (left, right, top, bottom), value=self.value)


def conv_same(cin: int, cout: int, kernel: int | tuple[int, int], stride: int = 1, bias: bool = True) -> nn.Module:
    """Conv2D(padding='same') as Keras builds it. With stride 1 and odd kernels TensorFlow pads (k - 1) / 2 on
    each side: the convolution's own padding, no copy of its input; with a stride, the padding depends on the
    input's size and may be uneven (SamePad, a copy)."""
    k = (kernel, kernel) if isinstance(kernel, int) else kernel
    if stride == 1 and all(n % 2 for n in k):
        return nn.Conv2d(cin, cout, k, padding=(k[0] // 2, k[1] // 2), bias=bias)
    return nn.Sequential(SamePad(k, stride), nn.Conv2d(cin, cout, k, stride=stride, bias=bias))


class MaxPoolSame(nn.Module):
    """MaxPooling2D(padding='same'): the padding never picked. Where TensorFlow pads only after (even sizes with
    stride 2), a pool whose last window runs past the edge (ceil_mode) computes it without a copy of its input;
    else the input is padded with -inf first."""

    def __init__(self, kernel: int, stride: int) -> None:
        super().__init__()
        self.kernel, self.stride = kernel, stride
        self.pad = SamePad((kernel, kernel), stride, float("-inf"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if all(self.pads_after_only(n) for n in x.shape[-2:]):
            return F.max_pool2d(x, self.kernel, self.stride, ceil_mode=True)
        return F.max_pool2d(self.pad(x), self.kernel, self.stride)

    def pads_after_only(self, n: int) -> bool:
        """Whether TensorFlow pads a side of n only after, as a pool whose last window runs past the edge reads it."""
        k, s = self.kernel, self.stride
        return n >= k and same_padding(n, k, s)[0] == 0 and math.ceil((n - k) / s) + 1 == math.ceil(n / s)


def max_pool_same(kernel: int, stride: int) -> nn.Module:
    """MaxPooling2D(padding='same')."""
    return MaxPoolSame(kernel, stride)


class PointwiseConv(nn.Conv2d):
    """A 1×1 convolution, with a stride or not. A strided one on a CPU takes the pixels it keeps first, then
    convolves them: the same numbers, while oneDNN's strided 1×1 convolution reads every pixel (measured here:
    3× slower, forward and backward). On a GPU its own stride (cuDNN's)."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__(cin, cout, 1, stride=stride)

    def _conv_forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        sh, sw = self.stride
        if (sh, sw) != (1, 1) and x.device.type == "cpu":
            return F.conv2d(x[:, :, ::sh, ::sw], weight, bias)
        return super()._conv_forward(x, weight, bias)


class ConvNorm(nn.Module):
    """A convolution with a bias, then a batch norm (ResNet-50's every conv): the bias folded into the norm, not
    added to every pixel. A batch norm subtracts its input's mean, so a constant per channel added before it
    changes nothing in training but its running mean, and the bias's gradient is zero; in eval the norm shifts
    by the bias, scaled. So the convolution runs without its bias (no pass over its output, none over the
    gradient's), the norm updates the running mean less the bias (a copy, the bias added back), and the bias is in
    the graph times zero: its gradient the zero it is (and a DDP job sees every parameter used). The same
    modules, weights and state as the pair it replaces."""

    def __init__(self, conv: nn.Module, norm: nn.BatchNorm2d) -> None:
        super().__init__()
        if not isinstance(conv, nn.Conv2d) or conv.bias is None or norm.momentum is None or norm.running_mean is None:
            raise TypeError("ConvNorm: a convolution with a bias that pads itself, then a norm with a momentum")
        self.conv, self.norm = conv, norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv, bn = self.conv, self.norm
        bias, momentum = conv.bias, bn.momentum
        mean, var = bn.running_mean, bn.running_var
        assert bias is not None and momentum is not None and mean is not None and var is not None  # as __init__ checked
        y = conv._conv_forward(x, conv.weight, None)
        if not bn.training:  # (y + bias - mean) · weight / σ + shift: the bias scaled as the norm scales it
            scaled = bias * bn.weight / torch.sqrt(var + bn.eps)
            return F.batch_norm(y, mean, var, bn.weight, bn.bias + scaled, False, 0.0, bn.eps)
        shift = bn.bias + bias * 0.0  # the bias used, with the gradient it has in training: zero
        with torch.no_grad():
            less = mean - bias  # a copy the norm updates (and keeps for its backward)
        out = F.batch_norm(y, less, var, bn.weight, shift, True, momentum, bn.eps)
        with torch.no_grad():
            mean.copy_(less + bias)
            if bn.num_batches_tracked is not None:
                bn.num_batches_tracked.add_(1)
        return out


class ShiftNorm(nn.Module):
    """BatchNormalization(scale=False), Keras's defaults (epsilon 1e-3, momentum 0.99): normalised, then a
    learned shift, no scale."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(channels, eps=1e-3, momentum=KERAS_MOMENTUM, affine=False)
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) + self.bias.view(1, -1, 1, 1)


class AvgPoolSame(nn.Module):
    """AveragePooling2D((3, 3), strides=1, padding='same'): each output the mean of its valid inputs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
