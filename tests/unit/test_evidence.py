"""The evidence pack's manifest and its SSH signature, with OpenSSH's own ssh-keygen: it verifies as the docs
say, a changed file fails, and so does a manifest changed after signing."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from dltestbed import evidence
from dltestbed.errors import ConfigError


@pytest.fixture
def key(tmp_path: Path) -> tuple[Path, Path]:
    """An ed25519 key without a passphrase, and an allowed_signers file naming its public half."""
    k = tmp_path / "keys" / "acceptor"
    k.parent.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ops", "-f", str(k)], check=True)
    signers = tmp_path / "keys" / "allowed_signers"
    signers.write_text(f'ops@example.org namespaces="{evidence.NAMESPACE}" {k.with_suffix(".pub").read_text()}')
    return k, signers


def _pack(folder: Path) -> Path:
    (folder / "junit").mkdir(parents=True)
    (folder / "report.json").write_text('{"verdict": "pass"}\n')
    (folder / "junit" / "gpu-a1.xml").write_text("<testsuite/>\n")
    (folder / "inventory.ini").write_text("[gpu_nodes]\ngpu-a1\n")
    return folder


def test_a_signed_pack_verifies_with_ssh_keygen_alone_and_with_verify(tmp_path: Path, key: tuple[Path, Path]) -> None:
    pack = _pack(tmp_path / "pack")
    manifest = evidence.write_manifest(pack)
    assert manifest.read_text().splitlines()[0].endswith("  inventory.ini")  # sha256sum's format, sorted
    assert subprocess.run(["sha256sum", "-c", "--quiet", evidence.MANIFEST], cwd=pack).returncode == 0
    evidence.sign(pack, key[0])
    documented = [  # the command the module's docstring gives
        "ssh-keygen", "-Y", "verify", "-f", str(key[1]), "-I", "ops@example.org", "-n", evidence.NAMESPACE,
        "-s", str(pack / evidence.SIGNATURE),
    ]  # fmt: skip
    with manifest.open("rb") as stdin:
        assert subprocess.run(documented, stdin=stdin, capture_output=True).returncode == 0
    checked = evidence.verify(pack, key[1], "ops@example.org")
    assert checked.ok and checked.signature is not None and "ops@example.org" in checked.signature


def test_a_changed_file_fails_verification(tmp_path: Path, key: tuple[Path, Path]) -> None:
    pack = _pack(tmp_path / "pack")
    evidence.write_manifest(pack)
    evidence.sign(pack, key[0])
    (pack / "report.json").write_text('{"verdict": "fail"}\n')
    (pack / "inventory.ini").unlink()
    (pack / "extra.txt").write_text("added later\n")
    checked = evidence.verify(pack, key[1], "ops@example.org")
    assert not checked.ok
    assert (checked.changed, checked.missing, checked.unlisted) == (
        ("report.json",),
        ("inventory.ini",),
        ("extra.txt",),
    )


def test_a_manifest_changed_after_signing_or_another_identity_does_not_verify(
    tmp_path: Path, key: tuple[Path, Path]
) -> None:
    pack = _pack(tmp_path / "pack")
    manifest = evidence.write_manifest(pack)
    evidence.sign(pack, key[0])
    with pytest.raises(ConfigError, match="the manifest's signature does not verify"):
        evidence.verify(pack, key[1], "someone@else.org")
    (pack / "report.json").write_text('{"verdict": "fail"}\n')
    manifest.write_text(manifest.read_text().replace(manifest.read_text().split()[0], "0" * 64))  # "fixed" to match
    with pytest.raises(ConfigError, match=r"^.*pack: the manifest's signature does not verify: ") as err:
        evidence.verify(pack, key[1], "ops@example.org")
    assert "\n" not in str(err.value)


def test_signing_needs_a_manifest_and_a_key_and_refuses_a_passphrase(tmp_path: Path) -> None:
    pack = _pack(tmp_path / "pack")
    with pytest.raises(ConfigError, match=r"no MANIFEST\.sha256 to sign"):
        evidence.sign(pack, tmp_path / "nokey")
    evidence.write_manifest(pack)
    with pytest.raises(ConfigError, match="no such file"):
        evidence.sign(pack, tmp_path / "nokey")
    locked = tmp_path / "locked"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-f", str(locked)], check=True)
    with pytest.raises(ConfigError, match=f"signing the evidence with {locked} failed: "):
        evidence.sign(pack, locked)  # nothing waits for the passphrase
    assert not (pack / evidence.SIGNATURE).exists()


def test_a_key_is_tried_on_a_scratch_file_and_nothing_stays(
    tmp_path: Path, key: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "tmp"  # this test's own temp folder: another CI tier signs packs too
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    evidence.check_key(key[0])
    assert not list(scratch.iterdir())
    with pytest.raises(ConfigError, match=r"^--sign-key '.*nokey': it cannot sign: no such file$"):
        evidence.check_key(tmp_path / "nokey")
