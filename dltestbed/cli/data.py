"""`dltestbed data make`: a real on-disk JPEG dataset, generated, for offline real-data runs."""

from __future__ import annotations

import os
from pathlib import Path

import typer

app = typer.Typer(help="Datasets for real-data runs.", no_args_is_help=True)


@app.command("make")
def make(
    out: Path = typer.Option(..., help="Folder to write: OUT/<class>/img_NNNNN.jpg."),
    classes: int = typer.Option(10, help="Number of class folders."),
    images_per_class: int = typer.Option(32, help="JPEG files per class."),
    size: int = typer.Option(64, help="Image width and height in px."),
    seed: int = typer.Option(0, help="Seed of the generated images (same seed, same files)."),
    force: bool = typer.Option(False, help="Write into OUT even if it already holds files."),
) -> None:
    """Write an ImageNet-style folder of generated JPEGs (the workload reads it with --data real)."""
    from dltestbed import dataset
    from dltestbed.errors import ConfigError

    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ConfigError(f"--out {str(out)!r} is not empty; use --force to write into it anyway")
    index = dataset.make(out, classes, images_per_class, size, seed)
    total = sum(os.path.getsize(f) for f in index.files)
    print(
        f"wrote {len(index.files)} JPEGs ({total / 1e6:.1f} MB) in {len(index.classes)} classes "
        f"of {size}x{size} px to {index.root}"
    )
