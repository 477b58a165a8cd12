"""The one way the server sends a request to a URL a user chose: resolved, vetted, pinned, capped.

A URL a PM types (a webhook endpoint, later a judge endpoint) must not reach the
machine's own services, the cloud metadata address or the private network. So the
host is resolved here, every address it resolves to must be a public one (any private,
loopback, link-local, multicast, reserved or unspecified address refuses the whole
host: a name that resolves to one public and one private address is an attack, not a
mistake), and the connection goes to the vetted address itself, with the name kept in
the Host header and the TLS server name. Resolving again at connect time, as a plain
client would, leaves a window in which a short-lived DNS answer changes to 127.0.0.1.

Redirects are followed by hand (at most `MAX_REDIRECTS`), each hop vetted like the
first. Only HTTPS is spoken, except to the hosts an admin names in
`RUBRICA_OUTBOUND_ALLOWED_HOSTS` (comma-separated, from the environment), which are
also exempt from the address check: tests point it at a loopback server of their own.
Proxy settings from the environment are ignored, since a proxy would resolve the name
itself. The response body is read up to a cap and no further.

No import of any app: core serves them all.
"""
from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urljoin

import httpx
from django.conf import settings

__all__ = [
    "OutboundError",
    "OutboundRefused",
    "OutboundResponse",
    "Resolver",
    "address_is_public",
    "outbound_request",
    "url_check",
]

MAX_REDIRECTS = 3
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_BODY_BYTES = 64 * 1024
_REDIRECTS = frozenset({301, 302, 303, 307, 308})

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]


class OutboundError(Exception):
    """The request did not produce a response. `error_class` is a short stable name
    (`refused`, `timeout`, `connect`, `tls`, `protocol`, `too_many_redirects`) that a
    page or a delivery row may show; the message never holds the target's body."""

    def __init__(self, message: str, *, error_class: str) -> None:
        super().__init__(message)
        self.error_class = error_class


class OutboundRefused(OutboundError):
    """The target is not one the server may send to; nothing was sent."""

    def __init__(self, message: str) -> None:
        super().__init__(message, error_class="refused")


@dataclass(frozen=True)
class OutboundResponse:
    status: int
    headers: httpx.Headers
    body: bytes  # at most `max_body_bytes`
    url: str  # the last hop's URL
    redirects: int


def _allowed_hosts() -> set[str]:
    raw = getattr(settings, "RUBRICA_OUTBOUND_ALLOWED_HOSTS", ())
    entries = raw.split(",") if isinstance(raw, str) else raw
    return {entry.strip().lower().strip("[]") for entry in entries if entry.strip()}


def address_is_public(address: IPAddress) -> bool:
    """Whether `address` is one the server may connect to without an admin naming its host."""
    if isinstance(address, ipaddress.IPv6Address):
        # ::ffff:127.0.0.1 and 2002:7f00:1:: (6to4) reach IPv4 addresses: judge those.
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is not None and not address_is_public(embedded):
            return False
    return not (address.is_private or address.is_loopback or address.is_link_local or address.is_multicast
                or address.is_reserved or address.is_unspecified or not address.is_global)


def _system_resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise OutboundError(f"The host {host} cannot be resolved.", error_class="dns") from None
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class _Target:
    url: httpx.URL
    host: str
    address: str


def url_check(url: str) -> httpx.URL:
    """The parsed URL if its form is acceptable (scheme, host, no credentials), else OutboundRefused.

    Checks only what can be known without resolving: a literal address is judged here,
    a name at connect time.
    """
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError):
        raise OutboundRefused("The URL is not valid.") from None
    host = (parsed.host or "").lower()
    if parsed.scheme not in ("https", "http") or not host:
        raise OutboundRefused("The URL must start with https:// and name a host.")
    if parsed.userinfo:
        raise OutboundRefused("The URL must not carry a user name or password.")
    allowed = host in _allowed_hosts()
    if parsed.scheme != "https" and not allowed:
        raise OutboundRefused("Only https:// URLs are allowed.")
    if not allowed and (host.rstrip(".") == "localhost" or host.rstrip(".").endswith(".localhost")):
        # RFC 6761: these names are loopback wherever they resolve; no need to ask DNS.
        raise OutboundRefused(f"The host {host} is this machine.")
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        return parsed
    if not allowed and not address_is_public(literal):
        raise OutboundRefused(f"The address {host} is not a public one.")
    return parsed


def _vet(url: httpx.URL, resolve: Resolver) -> _Target:
    parsed = url_check(str(url))
    host = (parsed.host or "").lower()
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    addresses = resolve(host, port)
    if not addresses:
        raise OutboundError(f"The host {host} cannot be resolved.", error_class="dns")
    if host not in _allowed_hosts():
        for text in addresses:
            address = ipaddress.ip_address(text.split("%", 1)[0])
            if not address_is_public(address):
                raise OutboundRefused(f"The host {host} resolves to an address that is not a public one.")
    return _Target(url=parsed, host=host, address=addresses[0].split("%", 1)[0])


def _pinned_request(client: httpx.Client, *, method: str, target: _Target, headers: Mapping[str, str],
                    content: bytes | None) -> httpx.Request:
    """A request to the vetted address, which says the name in Host and in the TLS server name."""
    url = target.url.copy_with(host=target.address)
    host_header = target.url.netloc.decode("ascii")
    request = client.build_request(method, url, headers={**headers, "Host": host_header}, content=content)
    # httpcore verifies the certificate against the SNI name, so verification stays on the name.
    request.extensions["sni_hostname"] = target.host
    return request


def _read_capped(response: httpx.Response, limit: int) -> bytes:
    if response.is_stream_consumed:
        # A response built in memory (httpx.MockTransport in tests) is read already.
        return response.content[:limit]
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_raw():
        chunks.append(chunk[: limit - size])
        size += len(chunks[-1])
        if size >= limit:
            break
    return b"".join(chunks)


def outbound_request(method: str, url: str, *, headers: Mapping[str, str] | None = None,
                     content: bytes | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                     max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, resolve: Resolver | None = None,
                     transport: httpx.BaseTransport | None = None) -> OutboundResponse:
    """Send one request to `url` through the guard; OutboundRefused before anything is sent to a
    target the server may not reach, OutboundError for a failure on the way.

    A 301/302/303 redirect turns the request into a body-less GET, 307/308 repeat it;
    `resolve` and `transport` are for tests.
    """
    hops: Iterable[int] = range(MAX_REDIRECTS + 1)
    current = httpx.URL(url.strip()) if isinstance(url, str) else url
    base_headers = dict(headers or {})
    timeout = httpx.Timeout(timeout_s)
    deadline = time.monotonic() + timeout_s * 3
    with httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False, transport=transport) as client:
        for hop in hops:
            target = _vet(current, resolve or _system_resolve)
            if time.monotonic() > deadline:
                raise OutboundError("The target took too long to answer.", error_class="timeout")
            request = _pinned_request(client, method=method, target=target, headers=base_headers, content=content)
            try:
                response = client.send(request, stream=True)
                try:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        if hop == MAX_REDIRECTS:
                            raise OutboundError("The target redirected too many times.",
                                                error_class="too_many_redirects")
                        current = httpx.URL(urljoin(str(target.url), location))
                        if response.status_code in (301, 302, 303):
                            method, content = "GET", None
                        continue
                    body = _read_capped(response, max_body_bytes)
                    return OutboundResponse(status=response.status_code, headers=response.headers, body=body,
                                            url=str(target.url), redirects=hop)
                finally:
                    response.close()
            except httpx.TimeoutException:
                raise OutboundError("The target did not answer in time.", error_class="timeout") from None
            except httpx.ConnectError as exc:
                error_class = "tls" if "SSL" in str(exc) or "CERTIFICATE" in str(exc).upper() else "connect"
                raise OutboundError("The target could not be reached.", error_class=error_class) from None
            except (httpx.InvalidURL, httpx.UnsupportedProtocol):
                raise OutboundRefused("The redirect target is not a valid URL.") from None
            except httpx.HTTPError:
                raise OutboundError("The target broke the connection.", error_class="protocol") from None
    raise OutboundError("The target redirected too many times.", error_class="too_many_redirects")
