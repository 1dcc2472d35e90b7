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

from dltestbed.workload.frameworks.pytorch.layers import (
    KERAS_MOMENTUM,
    AvgPoolSame,
    ConvNorm,
    PointwiseConv,
    ShiftNorm,
    conv_same,
    max_pool_same,
)


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


def conv_bn(cin: int, cout: int, kernel: tuple[int, int], stride: int = 1, same: bool = True) -> nn.Sequential:
    """Inception-v3's conv2d_bn: a conv without bias, a batch norm without scale, ReLU."""
    if same:
        return nn.Sequential(conv_same(cin, cout, kernel, stride, bias=False), ShiftNorm(cout), nn.ReLU())
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, bias=False), ShiftNorm(cout), nn.ReLU())


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
