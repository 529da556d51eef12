"""Which endpoints an owner may save, and which addresses their connections may reach."""

from __future__ import annotations

import pytest

from openmaic.modelconfig.addresses import endpoint_problem, internal


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.8.9.10", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
    "100.127.255.254", "0.0.0.0", "0.1.2.3", "224.0.0.1", "255.255.255.255", "::1", "::", "fd00::1", "fe80::1",
    "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::", "fe80::1%eth0", "nonsense",
])  # fmt: skip
def test_internal_addresses(address):
    assert internal(address)


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8",
                                     "64:ff9b::808:808"])
def test_public_addresses(address):
    assert not internal(address)


@pytest.mark.parametrize("url", [
    "http://127.1:8/v1", "http://2130706433:8/v1", "http://0x7f000001:8/v1", "http://0177.0.0.1:8/v1", "http://0:8/v1",
    "http://localhost.:8/v1", "http://localhost:8/v1", "http://api.localhost/v1", "http://127.0.0.1./v1",
    "http://[::1]/v1", "http://[::ffff:7f00:1]/v1", "http://[fe80::1%25eth0]/v1", "http://10.0.0.1/v1",
    "http://a@example.com/v1", "http://example.com\\@127.0.0.1/v1", "http://exa mple.com/v1", "ftp://example.com/",
    "http://example.com:99999/v1", "http://example.com./v1", "http://1.2.3.04/v1", "http://1.2.3/v1",
])  # fmt: skip
def test_endpoints_refused(url):
    assert endpoint_problem(url, allow_local=False) is not None


@pytest.mark.parametrize("url", ["https://api.example.com/v1", "http://93.184.215.14:8080/v1",
                                 "https://[2606:4700::1111]/v1", "https://xn--bcher-kva.example/v1"])
def test_endpoints_accepted(url):
    assert endpoint_problem(url, allow_local=False) is None


def test_local_endpoints_allowed_by_the_operator_still_need_plain_forms():
    assert endpoint_problem("http://127.0.0.1:11434/v1", allow_local=True) is None
    assert endpoint_problem("http://localhost:11434/v1", allow_local=True) is None
    assert endpoint_problem("http://ollama_host:11434/v1", allow_local=True) is None
    assert endpoint_problem("http://127.1:11434/v1", allow_local=True) is not None
