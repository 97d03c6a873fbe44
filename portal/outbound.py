"""The portal's one way to call an address a user gave it (a team's webhook): the address is checked against
server-side request forgery, and the request goes to the very IP that was checked.

An address is refused when any IP its host resolves to is loopback, link-local (cloud metadata lives there),
private, shared (CGNAT), multicast, reserved or unspecified, in IPv4 or IPv6 (an IPv4-mapped IPv6 address is judged
as its IPv4), unless the platform allows private targets. Resolving once to check and letting the HTTP library
resolve again to connect would let a name that answers differently the second time (DNS rebinding) reach an
internal address; so the connection is opened to the checked IP, with the original host name kept for the Host
header and for TLS (SNI and certificate verification)."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import urllib3

Resolver = Callable[[str, int], list[str]]  # host, port → IP addresses


class UnsafeAddress(ValueError):
    """The address may not be called: the message says why."""


def system_resolver(host: str, port: int) -> list[str]:
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UnsafeAddress(f"{host} does not resolve: {exc.strerror or exc}") from None
    return sorted({item[4][0] for item in found})


def _forbidden(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for test, words in ((ip.is_loopback, "loopback"), (ip.is_link_local, "link-local"),
                        (ip.is_multicast, "multicast"), (ip.is_unspecified, "unspecified"),
                        (ip.is_reserved, "reserved"), (ip.is_private, "private"),
                        (not ip.is_global, "not public")):
        if test:
            return words
    return ""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # as given (Host header, TLS name)
    port: int
    path: str  # path and query
    ip: str  # the checked address the connection goes to


def check_url(url: str, *, allow_private: bool = False, resolver: Resolver = system_resolver) -> Target:
    """The target of `url` if it may be called, else UnsafeAddress saying why."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise UnsafeAddress("Use an http:// or https:// address.")
    if parts.username or parts.password:
        raise UnsafeAddress("Leave credentials out of the address; the signature authenticates the portal.")
    host = parts.hostname
    if not host:
        raise UnsafeAddress("The address has no host.")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UnsafeAddress("The address has an invalid port.") from None
    try:
        literal = ipaddress.ip_address(host)
        ips = [str(literal)]
    except ValueError:
        ips = resolver(host, port)
    if not ips:
        raise UnsafeAddress(f"{host} does not resolve.")
    if not allow_private:
        for ip in ips:
            why = _forbidden(ipaddress.ip_address(ip.split("%", 1)[0]))
            if why:
                raise UnsafeAddress(f"{host} resolves to {ip}, a {why} address: the portal calls only public "
                                    "addresses.")
    path = parts.path or "/"
    if parts.query:
        path += f"?{parts.query}"
    return Target(scheme=parts.scheme, host=host, port=port, path=path, ip=ips[0])


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """HMAC-SHA256 over "<timestamp>.<body>", hex, as the receiver recomputes it."""
    return hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Answer:
    status: int
    body: str


def post(target: Target, body: bytes, headers: dict[str, str], *, timeout: float) -> Answer:
    """POST to the checked IP; redirects are not followed (a redirect could lead anywhere)."""
    host_header = target.host if target.port in (80, 443) else f"{target.host}:{target.port}"
    if ":" in target.host and not target.host.startswith("["):
        host_header = f"[{target.host}]" if target.port in (80, 443) else f"[{target.host}]:{target.port}"
    options = {"timeout": urllib3.Timeout(total=timeout), "retries": False, "maxsize": 1}
    if target.scheme == "https":
        pool = urllib3.HTTPSConnectionPool(target.ip, target.port, server_hostname=target.host,
                                           assert_hostname=target.host, cert_reqs="CERT_REQUIRED", **options)
    else:
        pool = urllib3.HTTPConnectionPool(target.ip, target.port, **options)
    try:
        response = pool.urlopen("POST", target.path, body=body, headers={**headers, "Host": host_header},
                                redirect=False, assert_same_host=False)
    finally:
        pool.close()
    return Answer(status=response.status, body=response.data[:500].decode(errors="replace"))
