"""The guarded outbound client refuses private targets, redirects included, and pins the vetted address."""
import pytest
from django.test import override_settings

from core.outbound import OutboundError, OutboundRefused, address_is_public, outbound_request, url_check
from tests.support.receiver import Receiver

NOBODY_ALLOWED = override_settings(RUBRICA_OUTBOUND_ALLOWED_HOSTS=[])


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


@NOBODY_ALLOWED
@pytest.mark.parametrize("url", [
    "https://127.0.0.1/hook", "https://localhost/hook", "https://169.254.169.254/latest/meta-data/",
    "https://10.1.2.3/hook", "https://[::1]/hook", "https://[::ffff:127.0.0.1]/hook", "https://0.0.0.0/hook",
    "https://192.168.0.1/", "https://224.0.0.1/", "https://[fe80::1]/",
])
def test_private_loopback_and_link_local_targets_are_refused_before_sending(url):
    with pytest.raises(OutboundRefused):
        outbound_request("POST", url, content=b"{}")


@NOBODY_ALLOWED
def test_a_name_that_resolves_to_one_public_and_one_private_address_is_refused():
    with pytest.raises(OutboundRefused):
        outbound_request("GET", "https://hooks.example.com/", resolve=lambda host, port: ["93.184.216.34", "10.0.0.5"])


@NOBODY_ALLOWED
def test_plain_http_is_refused_for_a_host_nobody_allowed():
    with pytest.raises(OutboundRefused):
        url_check("http://hooks.example.com/")


@pytest.mark.parametrize("url", ["ftp://example.com/", "https://user:pw@example.com/", "not a url", "https:///x"])
def test_malformed_urls_are_refused(url):
    with pytest.raises(OutboundRefused):
        url_check(url)


def test_public_addresses_pass_and_embedded_loopback_does_not():
    import ipaddress

    assert address_is_public(ipaddress.ip_address("93.184.216.34"))
    assert not address_is_public(ipaddress.ip_address("::ffff:127.0.0.1"))
    assert not address_is_public(ipaddress.ip_address("100.64.0.1"))


def test_an_allowed_loopback_host_receives_the_request_with_its_name_in_the_host_header(receiver):
    with override_settings(RUBRICA_OUTBOUND_ALLOWED_HOSTS=["localhost"]):
        # The name resolves once, to the address the connection then uses: no second lookup.
        lookups = []

        def resolve(host, port):
            lookups.append(host)
            return ["127.0.0.1"]

        response = outbound_request("POST", receiver.url(host="localhost"), content=b'{"a": 1}',
                                    headers={"Content-Type": "application/json"}, resolve=resolve)
    assert response.status == 200
    assert lookups == ["localhost"]
    method, path, headers, body = receiver.received[0]
    assert (method, path, body) == ("POST", "/hook", b'{"a": 1}')
    assert headers["Host"] == f"localhost:{receiver.port}"


def test_the_body_read_stops_at_the_cap(receiver):
    receiver.body = b"x" * 100_000
    with override_settings(RUBRICA_OUTBOUND_ALLOWED_HOSTS=["127.0.0.1"]):
        response = outbound_request("GET", receiver.url(), max_body_bytes=1000)
    assert len(response.body) == 1000


def test_a_redirect_to_loopback_is_refused_after_an_allowed_hop(receiver):
    # The allowed host answers with a redirect to a loopback name nobody allowed.
    receiver.responses = [(302, {"Location": "https://localhost/steal"})]
    with override_settings(RUBRICA_OUTBOUND_ALLOWED_HOSTS=["127.0.0.1"]), pytest.raises(OutboundRefused):
        outbound_request("POST", receiver.url(), content=b"{}")
    assert len(receiver.received) == 1


def test_redirects_are_followed_at_most_three_times(receiver):
    receiver.responses = [(307, {"Location": "/again"})]
    with override_settings(RUBRICA_OUTBOUND_ALLOWED_HOSTS=["127.0.0.1"]), pytest.raises(OutboundError) as caught:
        outbound_request("POST", receiver.url(), content=b"{}")
    assert caught.value.error_class == "too_many_redirects"
    assert len(receiver.received) == 4


def test_a_followed_redirect_reaches_its_target(receiver):
    receiver.responses = [(303, {"Location": "/done"}), (204, {})]
    with override_settings(RUBRICA_OUTBOUND_ALLOWED_HOSTS=["127.0.0.1"]):
        response = outbound_request("POST", receiver.url(), content=b"{}")
    assert (response.status, response.redirects) == (204, 1)
    assert [(m, p) for m, p, _, _ in receiver.received] == [("POST", "/hook"), ("GET", "/done")]


def test_a_closed_port_is_a_connect_error_not_a_crash():
    with override_settings(RUBRICA_OUTBOUND_ALLOWED_HOSTS=["127.0.0.1"]), pytest.raises(OutboundError) as caught:
        outbound_request("GET", "http://127.0.0.1:8689/", timeout_s=2)
    assert caught.value.error_class == "connect"


def test_under_pytest_a_host_name_is_never_looked_up(monkeypatch):
    """The suite's guard (tests/conftest.py `_no_dns`): a name fails as unresolvable, and the system
    resolver is not even asked, so no test can send a DNS query off this machine."""
    import socket

    from core import outbound

    asked: list[str] = []
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *args, **kwargs: asked.append(host) or [])

    with pytest.raises(outbound.OutboundError) as refused:
        outbound._system_resolve("hooks.example.com", 443)

    assert refused.value.error_class == "dns" and asked == []
