"""`dltestbed data make`: a real on-disk JPEG dataset, generated, for offline real-data runs."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from dltestbed.cli import deprecated

app = typer.Typer(help="Datasets for real-data runs.", no_args_is_help=True)


@app.command("make")
def make(
    data_dir: Path | None = typer.Option(
        None, "--data-dir", metavar="DIR", help="Folder to write: DIR/<class>/img_NNNNN.jpg (bench --data-dir)."
    ),
    classes: int = typer.Option(10, help="Number of class folders."),
    images_per_class: int = typer.Option(32, help="JPEG files per class."),
    image_size: int = typer.Option(64, "--image-size", metavar="PX", help="Image width and height in px."),
    seed: int = typer.Option(0, help="Seed of the generated images (same seed, same files)."),
    force: bool = typer.Option(False, "--force", help="Write into DIR even if it already holds files."),
    out: Path | None = deprecated.param(None, "--out", "--data-dir"),
    size: int | None = deprecated.param(None, "--size", "--image-size"),
) -> None:
    """Write an ImageNet-style folder of generated JPEGs (the workload reads it with --data real)."""
    from dltestbed import dataset
    from dltestbed.errors import ConfigError

    folder = data_dir or out
    if folder is None:
        raise ConfigError("--data-dir DIR: the folder to write the dataset to")
    px = size if size is not None else image_size
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--data-dir: a folder (got {str(folder)!r}, which exists and is not one)")
    if folder.is_dir() and any(folder.iterdir()) and not force:
        raise ConfigError(f"--data-dir: an empty folder, or add --force to write into it (got {str(folder)!r})")
    index = dataset.make(folder, classes, images_per_class, px, seed)
    total = sum(os.path.getsize(f) for f in index.files)
    print(
        f"wrote {len(index.files)} JPEGs ({total / 1e6:.1f} MB) in {len(index.classes)} classes "
        f"of {px}x{px} px to {index.root}"
    )
