"""A one-layer OCI image archive made from files (the pod sandbox's `pause`, built from Kubernetes' source): what
`ctr images import` reads, so a node without a registry has the image. Pure: bytes in, bytes out."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence

LAYER = "application/vnd.oci.image.layer.v1.tar"
CONFIG = "application/vnd.oci.image.config.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def _tar(members: Mapping[str, tuple[bytes, int]]) -> bytes:
    """A tar of (content, mode) by path, with fixed times and owners (the same files make the same digest)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, (data, mode) in sorted(members.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _blob(data: bytes) -> tuple[str, bytes]:
    return f"sha256:{hashlib.sha256(data).hexdigest()}", data


def archive(name: str, files: Mapping[str, tuple[bytes, int]], entrypoint: Sequence[str], arch: str = "amd64") -> bytes:
    """An OCI image layout, as one tar, of an image called `name` (repository:tag) whose one layer holds `files`
    (path → content, mode) and which runs `entrypoint`."""
    layer_digest, layer = _blob(_tar(files))
    config = {
        "architecture": arch,
        "os": "linux",
        "config": {"Entrypoint": list(entrypoint)},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }
    config_digest, config_raw = _blob(json.dumps(config, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": config_digest, "size": len(config_raw)},
        "layers": [{"mediaType": LAYER, "digest": layer_digest, "size": len(layer)}],
    }
    manifest_digest, manifest_raw = _blob(json.dumps(manifest, sort_keys=True).encode())
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": MANIFEST,
                "digest": manifest_digest,
                "size": len(manifest_raw),
                "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name},
            }
        ],
    }
    members = {
        "oci-layout": (b'{"imageLayoutVersion":"1.0.0"}', 0o644),
        "index.json": (json.dumps(index, sort_keys=True).encode(), 0o644),
        **{
            f"blobs/sha256/{digest.split(':')[1]}": (data, 0o644)
            for digest, data in ((layer_digest, layer), (config_digest, config_raw), (manifest_digest, manifest_raw))
        },
    }
    return _tar(members)
