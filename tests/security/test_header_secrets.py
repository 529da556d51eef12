"""Secret values in a provider's headers appear in no error text, no event and no log line.

``openmaic.yml`` refuses ``providers.*.headers`` (custom headers are not supported: the key goes in ``apiKey``),
and the refusal names the key, never its values. Headers a driver is given in code (``ProviderConfig.headers``)
are sent, but a failing call's error, its retries' log lines and the provider's repr carry none of them, even
when the provider echoes them back in its error body.
"""

from __future__ import annotations

import logging
import traceback

import httpx
import pytest

from openmaic.config import ProviderConfig, load_config
from openmaic.errors import ConfigError
from openmaic.models.errors import ProviderError
from openmaic.models.provider import build_provider
from openmaic.models.types import SystemMessage, UserMessage
from tests.fakes.provider_server import Status, open_fake_provider

SECRET = "sk-HEADER-SECRET-0123456789"


@pytest.mark.parametrize("where", ["headers: {Authorization: 'Bearer %s'}", "headers: {x-api-key: %s}\n    bogus: 1"])
def test_headers_in_the_file_are_refused_naming_the_key_never_the_value(tmp_path, where):
    path = tmp_path / "openmaic.yml"
    path.write_text("providers:\n  gw:\n    preset: openai\n    " + where % SECRET + "\nslots: {llm: 'gw:gpt-x'}\n")
    with pytest.raises(ConfigError) as refused:
        load_config(path, env={})
    assert "providers.gw.headers" in refused.value.message and refused.value.details["key"] == "providers.gw.headers"
    assert SECRET not in refused.value.message and SECRET not in repr(refused.value.details)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_failing_call_with_secret_headers_says_nothing_of_them(kind, caplog):
    caplog.set_level(logging.INFO)  # what a served process logs (logs.configure)
    async with open_fake_provider() as fake, httpx.AsyncClient(trust_env=False) as http:
        base_url = fake.openai_url if kind == "openai" else fake.anthropic_url
        cfg = ProviderConfig(kind=kind, base_url=base_url, headers={"X-Gateway-Token": SECRET}, max_retries=1,
                             timeout_s=5.0)
        provider = build_provider(kind, cfg, http=http, sleep=lambda _s: _no_sleep())
        # A gateway that echoes what it was sent, in its error body and a header: the worst case.
        echo = {"error": {"type": "denied", "message": f"bad token X-Gateway-Token: {SECRET}"}}
        fake.push(Status(503, echo, headers={"x-echo": SECRET}), Status(401, echo, headers={"x-echo": SECRET}))
        with pytest.raises(ProviderError) as failed:
            await provider.stream_turn("m", [SystemMessage("Be terse."), UserMessage("Hi.")], [], on_delta=None)
    assert [r.headers["x-gateway-token"] for r in fake.requests] == [SECRET, SECRET]  # it was sent, twice
    texts = [str(failed.value), repr(failed.value), repr(failed.value.details), repr(provider), repr(cfg),
             "".join(traceback.format_exception(failed.value)), caplog.text]
    assert caplog.records, "the retry is logged"
    assert not [t for t in texts if SECRET in t]


async def _no_sleep() -> None:
    return None
