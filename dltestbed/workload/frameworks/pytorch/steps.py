"""PyTorch's steps and inputs: the training and inference step (autocast, the gradient scaler, torch.compile,
a DDP job's loss averaged over its workers), synthetic and real batches (Pillow decodes, DataLoader's workers
read), and the accuracy on held-out images. Imported once PyTorch is loaded."""

from __future__ import annotations

import contextlib
import os
from types import ModuleType
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

AUTOCAST = {"mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}  # math → autocast's dtype


def autocast(torch: ModuleType, math: str, device: Any) -> Any:
    """The context the model's forward pass runs in: autocast to the math's 16-bit type, or nothing."""
    if math not in AUTOCAST:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=getattr(torch, AUTOCAST[math]))


def make_step(
    torch: ModuleType, model: Any, mode: str, math: str, compile_: bool, device: Any, workers: int = 1
) -> Any:
    """A step returning a float32 scalar tensor that depends on the whole computation: the loss of a training
    step (SGD, learning rate 0.01, momentum 0.9, as TensorFlow's), the sum of the logits in inference. Under
    autocast the model computes in 16 bit, the loss in float32; float16 scales the loss (GradScaler). In a
    job of `workers` (the model wrapped in DDP, which averages the gradients), the loss is averaged over the
    workers too, as TensorFlow's job reports the global batch's."""
    forward = torch.compile(model) if compile_ else model

    def cast() -> Any:
        return autocast(torch, math, device)

    if mode == "infer":
        model.eval()

        def infer(images: Any, labels: Any) -> Any:
            with torch.no_grad(), cast():
                return forward(images).float().sum()

        return infer
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler(device.type, enabled=math == "mixed_float16")
    loss_fn = torch.nn.CrossEntropyLoss()

    def train(images: Any, labels: Any) -> Any:
        optimizer.zero_grad(set_to_none=True)
        with cast():
            logits = forward(images)
        loss = loss_fn(logits.float(), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        loss = loss.detach()
        if workers > 1:
            torch.distributed.all_reduce(loss)
            loss = loss / workers
        return loss

    return train


def synthetic(torch: ModuleType, batch: int, size: int, classes: int, seed: int, device: Any) -> Any:
    """The same batch forever, on the device: the benchmark sees no input pipeline at all."""
    gen = torch.Generator().manual_seed(seed)
    images = torch.rand((batch, 3, size, size), generator=gen).to(device)
    labels = torch.randint(0, classes, (batch,), generator=gen).to(device)
    if device.type == "cuda":
        images = images.contiguous(memory_format=torch.channels_last)
    while True:
        yield images, labels


def _load(path: str, size: int) -> Any:
    """A JPEG decoded, resized to (size, size) bilinear, as float32 CHW in [0, 1] (Pillow, not torchvision)."""
    with Image.open(path) as img:
        rgb = img.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
    return np.asarray(rgb, dtype=np.float32).transpose(2, 0, 1) / 255.0


class Files(Dataset):
    """The dataset's files, each decoded on demand with its label (at module level: DataLoader's workers may be
    started by spawn or forkserver, which pickle it)."""

    def __init__(self, files: list[str], labels: list[int], size: int) -> None:
        self.files, self.labels, self.size = files, labels, size

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        return torch.from_numpy(_load(self.files[i], self.size)), self.labels[i]


def real_batches(torch: ModuleType, index: Any, batch: int, size: int, seed: int, device: Any) -> Any:
    """The files read from disk every step, shuffled each pass (seeded), decoded in worker processes, in
    batches of `batch` (the last short one dropped), forever."""
    gen = torch.Generator().manual_seed(seed)
    workers = min(4, len(os.sched_getaffinity(0)))
    loader = DataLoader(
        Files(list(index.files), list(index.labels), size),
        batch_size=batch,
        shuffle=True,
        drop_last=True,
        num_workers=workers,
        generator=gen,
        persistent_workers=workers > 0,
        pin_memory=device.type == "cuda",
    )
    while True:
        for images, y in loader:
            yield images.to(device, non_blocking=True), y.to(device, non_blocking=True)


def evaluate(
    torch: ModuleType, model: Any, index: Any, batch: int, size: int, math: str, device: Any
) -> tuple[int, int, float]:
    """(images, right at top-1, mean cross-entropy loss) of the model in inference on the held-out images,
    in file order."""
    model.eval()
    images = correct = 0
    total = 0.0
    files, labels = list(index.files), list(index.labels)
    with torch.no_grad():
        for start in range(0, len(files), batch):
            x = torch.stack([torch.from_numpy(_load(f, size)) for f in files[start : start + batch]]).to(device)
            y = torch.tensor(labels[start : start + batch], device=device)
            with autocast(torch, math, device):
                logits = model(x).float()
            correct += int((logits.argmax(dim=1) == y).sum())
            total += float(torch.nn.functional.cross_entropy(logits, y, reduction="sum"))
            images += len(y)
    return images, correct, total / images if images else float("nan")
