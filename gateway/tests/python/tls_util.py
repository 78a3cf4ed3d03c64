"""Certificates for the TLS tests, generated per test session with the
`cryptography` package: CAs (root and intermediate), server certificates
for 127.0.0.1/localhost (RSA or ECDSA), client certificates, an expired
one and one for another host. Each is written as PEM files a config can
name; nothing is fixed or checked in."""

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = datetime.datetime.now(datetime.timezone.utc)


def new_key(kind: str):
    """A fresh private key: "rsa" (2048 bits) or "ecdsa" (P-256)."""
    if kind == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


@dataclass
class Issued:
    """A certificate, its key, and the chain above it (issuers, leaf first
    excluded)."""
    cert: x509.Certificate
    key: object
    chain: tuple = ()

    def write(self, folder: Path, name: str, key_format: str = "pkcs8") -> tuple[Path, Path]:
        """Writes `name.pem` (the certificate, then its chain) and
        `name.key` ("pkcs8", or "traditional": PKCS#1 RSA / SEC1 EC)."""
        folder.mkdir(parents=True, exist_ok=True)
        cert_path, key_path = folder / f"{name}.pem", folder / f"{name}.key"
        pems = [self.cert.public_bytes(serialization.Encoding.PEM)]
        pems += [c.public_bytes(serialization.Encoding.PEM) for c in self.chain]
        cert_path.write_bytes(b"".join(pems))
        fmt = (serialization.PrivateFormat.PKCS8 if key_format == "pkcs8"
               else serialization.PrivateFormat.TraditionalOpenSSL)
        key_path.write_bytes(self.key.private_bytes(serialization.Encoding.PEM, fmt,
                                                    serialization.NoEncryption()))
        return cert_path, key_path

    def write_cert(self, path: Path) -> Path:
        """Writes the certificate alone (a CA file clients trust)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        return path

    @property
    def serial(self) -> int:
        return self.cert.serial_number


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(cn: str, parent: Issued | None = None, kind: str = "ecdsa") -> Issued:
    """A CA certificate: self-signed, or issued by `parent` (an
    intermediate)."""
    key = new_key(kind)
    issuer_key = parent.key if parent else key
    issuer_name = parent.cert.subject if parent else _name(cn)
    cert = (x509.CertificateBuilder()
            .subject_name(_name(cn)).issuer_name(issuer_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(NOW - datetime.timedelta(days=1))
            .not_valid_after(NOW + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(issuer_key, hashes.SHA256()))
    chain = ((parent.cert,) + parent.chain) if parent else ()
    # A root's own certificate is not sent in chains.
    return Issued(cert, key, tuple(c for c in chain if c.issuer != c.subject))


def issue(ca: Issued, cn: str, hosts=("127.0.0.1", "localhost"), client=False, kind="ecdsa",
          days=(-1, 365), client_too=False) -> Issued:
    """A leaf certificate issued by `ca`: a server one for `hosts`, or a
    client one (`client=True`); valid from `days[0]` to `days[1]` days
    from now. `client_too`: a server certificate that may act as a client
    as well (Redis Cluster nodes present theirs to each other)."""
    key = new_key(kind)
    sans = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client or client_too else []
    if not client:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(cn)).issuer_name(ca.cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(NOW + datetime.timedelta(days=days[0]))
               .not_valid_after(NOW + datetime.timedelta(days=days[1]))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    chain = ((ca.cert,) + ca.chain) if ca.cert.issuer != ca.cert.subject else ()
    return Issued(cert, key, chain)


def serial_of(der: bytes) -> int:
    """The serial number of a DER certificate (what a TLS peer sent)."""
    return x509.load_der_x509_certificate(der).serial_number
