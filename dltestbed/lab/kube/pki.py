"""The lab cluster's certificates and kubeconfigs, as kubeadm lays them out: one CA; the apiserver's serving
certificate; a client certificate for each component (its user and group are what RBAC and the Node authorizer
read: `system:node:<name>` in `system:nodes` for a kubelet); the service-account key pair. Written with the
`cryptography` library, ECDSA P-256 keys, valid for a year (a lab lives for hours)."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID = datetime.timedelta(days=365)
ADMIN = ("dltestbed-admin", "system:masters")  # what `kubectl` and the launcher act as: the cluster's admin


@dataclass(frozen=True)
class Pair:
    """A certificate and its key, PEM."""

    cert: bytes
    key: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(cn: str, org: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(parts)


def ca(name: str) -> Pair:
    """A self-signed CA for the cluster called `name`."""
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{name}-ca"))
        .issuer_name(_name(f"{name}-ca"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALID)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )  # digital signature, cert and CRL signing
        .sign(key, hashes.SHA256())
    )
    return Pair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def issue(
    authority: Pair, cn: str, org: str | None = None, addresses: tuple[str, ...] = (), names: tuple[str, ...] = ()
) -> Pair:
    """A certificate the CA signs: a client's (user `cn`, group `org`), or a server's when it has addresses or
    names (its subject alternative names)."""
    ca_cert = x509.load_pem_x509_certificate(authority.cert)
    ca_key = serialization.load_pem_private_key(authority.key, None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    server = bool(addresses or names)
    usage = [ExtendedKeyUsageOID.SERVER_AUTH] if server else [ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, org))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALID)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    )
    if server:
        alt: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
        alt += [x509.DNSName(n) for n in names]
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return Pair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def service_account_key() -> tuple[bytes, bytes]:
    """The key pair the apiserver signs service-account tokens with: (private PEM, public PEM)."""
    key = _key()
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _pem_key(key), public


def kubeconfig(cluster: str, server: str, authority: Pair, user: str, client: Pair) -> str:
    """A kubeconfig with one cluster, one user and one context, its certificates inline (one file to hand over)."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"server": server, "certificate-authority-data": b64(authority.cert)}}
        ],
        "users": [
            {"name": user, "user": {"client-certificate-data": b64(client.cert), "client-key-data": b64(client.key)}}
        ],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
        "current-context": cluster,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def write(path: Path, data: bytes | str, private: bool = False) -> None:
    """A file of the PKI: keys and kubeconfigs only root reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(raw)
