"""Certificates and keys for the local control plane: a CA, the API server's serving certificate,
an admin client certificate (group system:masters), and the service-account signing key pair."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _cert(subject, issuer, key, signer, *, ca=False, server=False, sans=()):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        # Key identifiers, as kubeadm's certificates carry: Python >= 3.13 verifies strictly
        # (VERIFY_X509_STRICT) and refuses a chain without an Authority Key Identifier.
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if sans:
        names = [x509.IPAddress(ipaddress.ip_address(s)) if s[0].isdigit() else x509.DNSName(s) for s in sans]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(signer, hashes.SHA256())


def write_pki(directory: Path) -> dict[str, Path]:
    """Write every file the control plane needs into `directory`; return their paths by role."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca = _cert(_name("enginewright-test-ca"), _name("enginewright-test-ca"), ca_key, ca_key, ca=True)
    files: dict[str, Path] = {}

    def write(role: str, data: bytes) -> None:
        path = directory / role
        path.write_bytes(data)
        path.chmod(0o600)
        files[role] = path

    write("ca.crt", ca.public_bytes(serialization.Encoding.PEM))
    write("ca.key", _pem_key(ca_key))
    server_key = _key()
    server = _cert(
        _name("kube-apiserver"),
        ca.subject,
        server_key,
        ca_key,
        server=True,
        sans=(
            "127.0.0.1",
            "10.0.0.1",
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
    )
    write("apiserver.crt", server.public_bytes(serialization.Encoding.PEM))
    write("apiserver.key", _pem_key(server_key))
    admin_key = _key()
    admin = _cert(_name("enginewright-admin", "system:masters"), ca.subject, admin_key, ca_key)
    write("admin.crt", admin.public_bytes(serialization.Encoding.PEM))
    write("admin.key", _pem_key(admin_key))
    sa_key = _key()
    write("sa.key", _pem_key(sa_key))
    write(
        "sa.pub",
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
    )
    return files


if __name__ == "__main__":  # python -m tests.cluster.pki DIR: for a machine without cryptography (ENGINEWRIGHT_PKI)
    import sys

    for role, path in write_pki(Path(sys.argv[1])).items():
        print(role, path)
