"""An acceptance's evidence pack as one folder whose manifest lists every file's sha256, signed with the user's SSH
key when one is given (`ssh-keygen -Y sign`, namespace `dltestbed-acceptance`): the manifest is the signed verdict.
Anyone checks it with OpenSSH alone:

    ssh-keygen -Y verify -f allowed_signers -I IDENTITY -n dltestbed-acceptance -s MANIFEST.sha256.sig \\
        < MANIFEST.sha256

and then each file against the manifest (`sha256sum -c MANIFEST.sha256`, or `verify` here, which does both)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dltestbed.errors import ConfigError

MANIFEST = "MANIFEST.sha256"
SIGNATURE = MANIFEST + ".sig"
NAMESPACE = "dltestbed-acceptance"  # ssh-keygen -Y's namespace: a signature for another purpose does not verify here


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.rglob("*") if p.is_file() and p.relative_to(folder).as_posix() not in (MANIFEST, SIGNATURE)
    )


def write_manifest(folder: Path) -> Path:
    """MANIFEST.sha256 in `folder`: every other file's sha256 and path, in sha256sum's format, sorted by path."""
    lines = [f"{_sha256(p)}  {p.relative_to(folder).as_posix()}\n" for p in _files(folder)]
    out = folder / MANIFEST
    out.write_text("".join(lines), encoding="utf-8")
    (folder / SIGNATURE).unlink(missing_ok=True)  # a signature of another manifest must not stay beside it
    return out


def _ssh_keygen() -> str:
    found = shutil.which("ssh-keygen")
    if found is None:
        raise ConfigError("signing the evidence needs ssh-keygen (OpenSSH 8.1 or newer): install openssh-client")
    return found


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [x for x in (proc.stderr + proc.stdout).splitlines() if x.strip()]
    return lines[-1].strip() if lines else f"exit {proc.returncode}"


def sign(folder: Path, key: Path) -> Path:
    """Sign the folder's manifest with the SSH private key `key` (its path only is passed: the key never enters
    a command line or a log); MANIFEST.sha256.sig. A key that needs a passphrase is refused in one line (nothing
    waits for one: use ssh-agent, whose key ssh-keygen uses when `key` is the public half)."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise ConfigError(f"{folder}: no {MANIFEST} to sign")
    failed = _sign(manifest, key)
    if failed:
        raise ConfigError(f"signing the evidence with {key} failed: {failed}")
    return folder / SIGNATURE


def check_key(key: Path) -> None:
    """`key` tried as `sign` uses it, on a scratch file in a folder removed after: a ConfigError line when it is
    no key, needs a passphrase, or ssh-keygen is missing; before any work whose end it signs."""
    with tempfile.TemporaryDirectory(prefix="dltestbed-key-") as scratch:
        probe = Path(scratch) / "probe"
        probe.write_text("dltestbed: can this key sign?\n", encoding="utf-8")
        failed = _sign(probe, key)
    if failed:
        raise ConfigError(f"--sign-key {str(key)!r}: it cannot sign: {failed}")


def _sign(path: Path, key: Path) -> str:
    """`ssh-keygen -Y sign` of a file (its signature beside it, as `.sig`): what went wrong, or "" when signed."""
    if not key.is_file():
        return "no such file"
    proc = subprocess.run(
        [_ssh_keygen(), "-Y", "sign", "-f", str(key), "-n", NAMESPACE, str(path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return "" if proc.returncode == 0 and path.with_name(path.name + ".sig").is_file() else _last_line(proc)


@dataclass(frozen=True)
class Checked:
    """What `verify` found: the signature's verdict (None: not checked) and the files that differ."""

    signature: str | None  # ssh-keygen's line when it verified, None when no signers were given
    changed: tuple[str, ...]  # listed, but not with this content
    missing: tuple[str, ...]  # listed, not there
    unlisted: tuple[str, ...]  # there, not listed

    @property
    def ok(self) -> bool:
        """Whether every file is as the manifest says."""
        return not (self.changed or self.missing or self.unlisted)


def verify(folder: Path, signers: Path | None = None, identity: str = "") -> Checked:
    """The manifest's signature checked against `signers` (an allowed_signers file) for `identity` — a
    ConfigError line when it does not verify — and then every file against the manifest."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise ConfigError(f"{folder}: no {MANIFEST}: not an evidence pack")
    said = None
    if signers is not None:
        if not (folder / SIGNATURE).is_file():
            raise ConfigError(f"{folder}: no {SIGNATURE}: the evidence was not signed")
        argv = [_ssh_keygen(), "-Y", "verify", "-f", str(signers), "-I", identity, "-n", NAMESPACE]
        with manifest.open("rb") as stdin:
            proc = subprocess.run(
                [*argv, "-s", str(folder / SIGNATURE)], stdin=stdin, capture_output=True, text=True, timeout=60
            )
        if proc.returncode != 0:
            raise ConfigError(f"{folder}: the manifest's signature does not verify: {_last_line(proc)}")
        said = _last_line(proc)
    listed = {}
    for line in manifest.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        listed[name] = digest
    there = {p.relative_to(folder).as_posix(): p for p in _files(folder)}
    changed = tuple(n for n, d in listed.items() if n in there and _sha256(there[n]) != d)
    missing = tuple(n for n in listed if n not in there)
    unlisted = tuple(n for n in there if n not in listed)
    return Checked(said, changed, missing, unlisted)
