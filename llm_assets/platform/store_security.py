"""Key material that closes the embedded store's internal listeners to anyone without credentials.

Besides its S3 port, `weed mini` opens HTTP and gRPC ports for its master, volume server, filer and admin server. They
know no users: out of the box anyone on the machine can read, write and delete through them. SeaweedFS secures them
with a `security.toml` read from the working directory: mutual TLS (a client certificate from a private CA) on every
gRPC and internal HTTP port, and JWT signing keys the volume server and filer check on every read and write.

`write_security_config` makes fresh material on every start: nothing persistent depends on it (JWTs live seconds, the
certificates only authenticate weed's parts to each other), so an existing state folder simply gets it, and each
restart rotates it. The CA's private key is never written: no one can issue another certificate the store accepts.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import secrets
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Every component section the scaffold of SeaweedFS 4.48 knows: a gRPC server whose section has no certificate
# listens in plain text, so sections of components `weed mini` does not start today cost nothing and stay safe later.
GRPC_COMPONENTS = ("master", "volume", "filer", "s3", "admin", "worker", "msg_broker", "msg_agent", "mq")
HTTPS_COMPONENTS = ("master", "volume", "filer", "admin")  # everything with an HTTP port except S3
JWT_SECTIONS = ("jwt.signing", "jwt.signing.read", "jwt.filer_signing", "jwt.filer_signing.read")
# weed's default is 10 s between minting a token and using it; on a loaded 2-core machine a chunk upload can take
# longer to reach the volume server, and a token only ever travels over loopback TLS.
JWT_LIFETIME_SECONDS = 60


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` readable by the owner only, replacing it atomically (weed may be reading the old one)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)  # in case a leftover tmp file had looser permissions
        f.write(data)
    os.replace(tmp, path)


def make_private(root: Path) -> None:
    """Make `root` 0700 and take every group/other permission off everything under it.

    Upgrades state folders written before the store was locked down (weed then left data files 0644, folders 0755).
    """
    from llm_assets.platform.environment import private_dir, tighten

    tighten(private_dir(root))


def loopback_certificates(name: str = "llm-assets embedded store") -> tuple[bytes, bytes, bytes]:
    """A throw-away CA and one certificate for 127.0.0.1 signed by it: (CA certificate, certificate, its key), PEM.

    One certificate serves every component, as server and as client (all of weed's run in one process; the local
    cluster's processes are one trust domain). The CA's key is dropped: no one can issue another certificate.
    """
    now = datetime.datetime.now(datetime.timezone.utc)
    valid_from, valid_to = now - datetime.timedelta(days=1), now + datetime.timedelta(days=3650)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(valid_from).not_valid_after(valid_to)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(valid_from).not_valid_after(valid_to)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                    x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return (ca.public_bytes(pem), cert.public_bytes(pem),
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def tls_files(state_dir: Path) -> dict[str, Path]:
    """Where the CA certificate, the store's certificate and its key live (a client needs all three to get in)."""
    folder = state_dir / "tls"
    return {"ca": folder / "ca.crt", "cert": folder / "store.crt", "key": folder / "store.key"}


def write_security_config(state_dir: Path) -> Path:
    """Write fresh certificates, JWT keys and `state_dir/security.toml` (all 0600, in 0700 folders); return its path."""
    files = tls_files(state_dir)
    files["ca"].parent.mkdir(mode=0o700, exist_ok=True)
    for name, pem in zip(("ca", "cert", "key"), loopback_certificates(), strict=True):
        write_private(files[name], pem)
    ca, cert, key = (json.dumps(str(files[name])) for name in ("ca", "cert", "key"))  # JSON strings are TOML strings

    lines = []
    for section in JWT_SECTIONS:
        lines += [f"[{section}]", f'key = "{secrets.token_hex(32)}"', f"expires_after_seconds = {JWT_LIFETIME_SECONDS}"]
    lines += ["[grpc]", f"ca = {ca}"]
    for component in GRPC_COMPONENTS:
        lines += [f"[grpc.{component}]", f"cert = {cert}", f"key = {key}"]
    lines += ["[grpc.client]", f"cert = {cert}", f"key = {key}"]
    for component in HTTPS_COMPONENTS:  # `ca` set: a client certificate is required, not just TLS
        lines += [f"[https.{component}]", f"cert = {cert}", f"key = {key}", f"ca = {ca}"]
    lines += ["[https.client]", "enabled = true", f"cert = {cert}", f"key = {key}", f"ca = {ca}"]
    path = state_dir / "security.toml"
    write_private(path, ("\n".join(lines) + "\n").encode())
    return path
