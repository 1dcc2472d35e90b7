"""`dltestbed image build`: the benchmark image, built on this machine (no registry needed)."""

from __future__ import annotations

import typer

app = typer.Typer(help="The container image the workload runs in (cbm targets).", no_args_is_help=True)


@app.command("build")
def build(
    runtime: str | None = typer.Option(
        None, help="docker or podman (default: docker if its daemon answers, else podman)."
    ),
    base: str | None = typer.Option(
        None,
        help="Build on this image from the runtime's local store (default: a Debian rootfs made with debootstrap).",
    ),
) -> None:
    """Build (or find, when its inputs are unchanged) the workload image; prints its tag and digest."""
    import time

    from dltestbed.provision import image, wheelhouse

    t0 = time.monotonic()
    rt = runtime or image.detect_runtime()
    house = wheelhouse.build("cpu")
    found = image.find(rt, house, base) if image.check_runtime(rt) else None
    built = found or image.build(rt, house, base)
    took = time.monotonic() - t0
    what = "up to date" if found else f"built in {took:.0f} s"
    typer.echo(f"{rt} image {built.tag} ({what}): {built.digest}", err=True)
    typer.echo(built.tag)
