"""The benchmark models in PyTorch, layer for layer those of frameworks/tensorflow/models.py (Keras): the same layers,
sizes and padding, the same weights per layer (tests/tf/test_pytorch.py counts them against Keras's).
Written here, not taken from torchvision: torchvision's ResNet-50 is v1.5 without conv biases, its
Inception-v3 has an auxiliary head and scaled batch norms, and torchvision does not import beside the CPU
build of PyTorch this project's CI installs.

Keras's conventions kept: TensorFlow's 'same' padding (with a stride, the extra row and column go after),
max pools that ignore their padding, 3×3 average pools over the valid pixels only, batch norms with
Keras's epsilon and momentum (Keras's 0.99 is PyTorch's 0.01), and Inception-v3's batch norms without
a scale (Keras's `scale=False`: a learned shift only). Inputs are NCHW, logits out."""

from __future__ import annotations

import math
from collections.abc import Sequence

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


class AlexNet(nn.Module):
    """frameworks/tensorflow/models.alexnet: 5 conv + 3 dense, ReLU, 'same' max pools, dropout 0.5."""

    def __init__(self, size: int, classes: int) -> None:
        super().__init__()
        relu = nn.ReLU
        self.features = nn.Sequential(
            conv_same(3, 96, 11, 4),
            relu(),
            max_pool_same(3, 2),
            conv_same(96, 256, 5),
            relu(),
            max_pool_same(3, 2),
            conv_same(256, 384, 3),
            relu(),
            conv_same(384, 384, 3),
            relu(),
            conv_same(384, 256, 3),
            relu(),
            max_pool_same(3, 2),
        )
        side = size
        for stride in (4, 2, 2, 2):
            side = math.ceil(side / stride)
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(256 * side * side, 4096),
            relu(),
            nn.Dropout(0.5),
            nn.Linear(4096, 4096),
            relu(),
            nn.Dropout(0.5),
            nn.Linear(4096, classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Keras flattens NHWC: the dense layer sees the same features in another order (same weights' count)
        return self.classifier(self.features(x))


def _bn(channels: int) -> nn.BatchNorm2d:
    """ResNet50's BatchNormalization(epsilon=1.001e-5)."""
    return nn.BatchNorm2d(channels, eps=1.001e-5, momentum=KERAS_MOMENTUM)


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


class Bottleneck(nn.Module):
    """Keras's residual_block_v1: the stride on the first 1×1 conv, convs with biases (each folded into its norm:
    ConvNorm), the shortcut's conv (when there is one) built first, as Keras builds it."""

    def __init__(self, cin: int, filters: int, stride: int, conv_shortcut: bool) -> None:
        super().__init__()
        self.shortcut = ConvNorm(PointwiseConv(cin, 4 * filters, stride), _bn(4 * filters)) if conv_shortcut else None
        self.body = nn.Sequential(
            ConvNorm(PointwiseConv(cin, filters, stride), _bn(filters)),
            nn.ReLU(),
            ConvNorm(conv_same(filters, filters, 3), _bn(filters)),
            nn.ReLU(),
            ConvNorm(PointwiseConv(filters, 4 * filters), _bn(4 * filters)),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        short = x if self.shortcut is None else self.shortcut(x)
        return F.relu(self.body(x).add_(short), inplace=True)  # the sum in the body's output: no third tensor


class ResNet50(nn.Module):
    """keras.applications.ResNet50 (v1: the stride in the block's first 1×1 conv; biases on every conv, each
    folded into the batch norm after it: ConvNorm)."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [  # Keras: ZeroPadding2D(3), the conv; after the ReLU ZeroPadding2D(1), the pool
            ConvNorm(nn.Conv2d(3, 64, 7, stride=2, padding=3), _bn(64)),  # the conv's own zero padding: no copy
            nn.ReLU(),
            nn.MaxPool2d(3, 2, padding=1),  # after a ReLU a zero is never above the window's max: the same numbers
        ]
        cin = 64
        for filters, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for b in range(blocks):
                layers.append(Bottleneck(cin, filters, stride if b == 0 else 1, conv_shortcut=b == 0))
                cin = 4 * filters
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).mean(dim=(2, 3)))


class ShiftNorm(nn.Module):
    """BatchNormalization(scale=False), Keras's defaults (epsilon 1e-3, momentum 0.99): normalised, then a
    learned shift, no scale."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(channels, eps=1e-3, momentum=KERAS_MOMENTUM, affine=False)
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) + self.bias.view(1, -1, 1, 1)


def conv_bn(cin: int, cout: int, kernel: tuple[int, int], stride: int = 1, same: bool = True) -> nn.Sequential:
    """Inception-v3's conv2d_bn: a conv without bias, a batch norm without scale, ReLU."""
    if same:
        return nn.Sequential(conv_same(cin, cout, kernel, stride, bias=False), ShiftNorm(cout), nn.ReLU())
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, bias=False), ShiftNorm(cout), nn.ReLU())


class AvgPoolSame(nn.Module):
    """AveragePooling2D((3, 3), strides=1, padding='same'): each output the mean of its valid inputs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)


class Branches(nn.Module):
    """An Inception block: its branches side by side, their outputs concatenated on the channels. A branch
    is a sequence, or (a stem, then two heads whose outputs are concatenated: mixed 9 and 10)."""

    def __init__(self, *branches: nn.Module) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([b(x) for b in self.branches], dim=1)


class Split(nn.Module):
    """A stem, then two heads side by side (mixed 9 and 10's 1×3 and 3×1)."""

    def __init__(self, stem: nn.Module, heads: Sequence[nn.Module]) -> None:
        super().__init__()
        self.stem, self.heads = stem, nn.ModuleList(heads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        return torch.cat([h(y) for h in self.heads], dim=1)


def _chain(cin: int, *convs: tuple[int, tuple[int, int]]) -> nn.Sequential:
    """Convs one after another: (filters, kernel) each, 'same', stride 1."""
    out = []
    for cout, k in convs:
        out.append(conv_bn(cin, cout, k))
        cin = cout
    return nn.Sequential(*out)


def _pool_branch(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(AvgPoolSame(), conv_bn(cin, cout, (1, 1)))


def _mixed_35(cin: int, pool: int) -> Branches:
    """Mixed 0–2 (35×35)."""
    return Branches(
        _chain(cin, (64, (1, 1))),
        _chain(cin, (48, (1, 1)), (64, (5, 5))),
        _chain(cin, (64, (1, 1)), (96, (3, 3)), (96, (3, 3))),
        _pool_branch(cin, pool),
    )


def _mixed_17(c7: int) -> Branches:
    """Mixed 4–7 (17×17, 768 channels), with c7 channels inside the 7×7 factorised branches."""
    return Branches(
        _chain(768, (192, (1, 1))),
        _chain(768, (c7, (1, 1)), (c7, (1, 7)), (192, (7, 1))),
        _chain(768, (c7, (1, 1)), (c7, (7, 1)), (c7, (1, 7)), (c7, (7, 1)), (192, (1, 7))),
        _pool_branch(768, 192),
    )


def _mixed_8x8(cin: int) -> Branches:
    """Mixed 9 and 10 (8×8, 2048 channels out)."""
    return Branches(
        _chain(cin, (320, (1, 1))),
        Split(_chain(cin, (384, (1, 1))), [conv_bn(384, 384, (1, 3)), conv_bn(384, 384, (3, 1))]),
        Split(_chain(cin, (448, (1, 1)), (384, (3, 3))), [conv_bn(384, 384, (1, 3)), conv_bn(384, 384, (3, 1))]),
        _pool_branch(cin, 192),
    )


class InceptionV3(nn.Module):
    """keras.applications.InceptionV3 without its top's pooling options: global average pool, dense logits."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            conv_bn(3, 32, (3, 3), 2, same=False),
            conv_bn(32, 32, (3, 3), same=False),
            conv_bn(32, 64, (3, 3)),
            nn.MaxPool2d(3, 2),
            conv_bn(64, 80, (1, 1), same=False),
            conv_bn(80, 192, (3, 3), same=False),
            nn.MaxPool2d(3, 2),
            _mixed_35(192, 32),
            _mixed_35(256, 64),
            _mixed_35(288, 64),
            Branches(  # mixed 3: to 17×17
                conv_bn(288, 384, (3, 3), 2, same=False),
                nn.Sequential(
                    conv_bn(288, 64, (1, 1)), conv_bn(64, 96, (3, 3)), conv_bn(96, 96, (3, 3), 2, same=False)
                ),
                nn.MaxPool2d(3, 2),
            ),
            _mixed_17(128),
            _mixed_17(160),
            _mixed_17(160),
            _mixed_17(192),
            Branches(  # mixed 8: to 8×8
                nn.Sequential(conv_bn(768, 192, (1, 1)), conv_bn(192, 320, (3, 3), 2, same=False)),
                nn.Sequential(
                    _chain(768, (192, (1, 1)), (192, (1, 7)), (192, (7, 1))),
                    conv_bn(192, 192, (3, 3), 2, same=False),
                ),
                nn.MaxPool2d(3, 2),
            ),
            _mixed_8x8(1280),
            _mixed_8x8(2048),
        )
        self.fc = nn.Linear(2048, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).mean(dim=(2, 3)))


def build(name: str, size: int, classes: int) -> nn.Module:
    """A model by catalogue name, input (N, 3, size, size), `classes` logits."""
    if name == "alexnet":
        return AlexNet(size, classes)
    if name == "resnet50":
        return ResNet50(classes)
    if name == "inception3":
        return InceptionV3(classes)
    raise ValueError(f"unknown model {name!r}")


def weights_per_layer(model: nn.Module) -> list[tuple[str, int]]:
    """(kind, weights) of each layer that holds weights, in the order they are built: parameters and the
    batch norms' running statistics (what Keras's count_params counts; not PyTorch's batch counter)."""
    out = []
    for module in model.modules():
        if isinstance(module, ShiftNorm):
            continue  # its norm's statistics and its shift are one Keras layer, counted at the norm
        own = sum(p.numel() for p in module.parameters(recurse=False))
        own += sum(b.numel() for n, b in module.named_buffers(recurse=False) if n != "num_batches_tracked")
        if isinstance(module, nn.BatchNorm2d) and not module.affine:
            own += module.num_features  # its ShiftNorm's shift
        if own:
            kind = next(
                k
                for t, k in ((nn.Conv2d, "conv"), (nn.Linear, "dense"), (nn.BatchNorm2d, "norm"))
                if isinstance(module, t)
            )
            out.append((kind, own))
    return out
