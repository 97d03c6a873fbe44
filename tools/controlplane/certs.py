"""The control plane's key material: a CA, a serving certificate for 127.0.0.1 signed by it (with the in-cluster
names kube-apiserver's own certificate carries, as kubeadm's `certs` phase issues them), a service-account signing
key and random bearer tokens. Generated with `cryptography` for every start; nothing is kept."""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVING_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                 "kubernetes.default.svc.cluster.local")
SERVING_IPS = ("127.0.0.1", "10.96.0.1")  # loopback and the first address of the service range


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_pem: bytes
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_public: Path


def token() -> str:
    return secrets.token_urlsafe(32)


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def generate(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(hours=1), now + datetime.timedelta(days=365))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpu-portal-controlplane-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(valid[0]).not_valid_after(valid[1])
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    serving_key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName(n) for n in SERVING_NAMES] + [x509.IPAddress(ipaddress.ip_address(i)) for i in SERVING_IPS]
    serving = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
               .issuer_name(ca_name).public_key(serving_key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(valid[0]).not_valid_after(valid[1])
               .add_extension(x509.SubjectAlternativeName(names), critical=False)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                              critical=False)
               .sign(ca_key, hashes.SHA256()))
    # Service-account tokens are signed RS256 (kube-apiserver's default for an RSA key).
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    return Pki(
        ca_cert=_write(directory / "ca.crt", ca_pem), ca_pem=ca_pem,
        serving_cert=_write(directory / "apiserver.crt", serving.public_bytes(serialization.Encoding.PEM)),
        serving_key=_write(directory / "apiserver.key", _pem_key(serving_key)),
        sa_key=_write(directory / "sa.key", _pem_key(sa_key)),
        sa_public=_write(directory / "sa.pub", sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)),
    )
