"""The metrics helpers (bounded labels, timing), a routed model call's observations, and where the admin listener
listens."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram

from openmaic.admin import DEFAULT_ADMIN_PORT, admin_port
from openmaic.config import ProviderSpec, default_config, parse_config
from openmaic.metrics import sample, step_family, timed
from openmaic.modelconfig.layer import ModelLayer
from openmaic.modelconfig.resolve import resolve
from openmaic.models.errors import ProviderError
from openmaic.models.provider import RoutedProvider, provider_label


def test_step_names_lose_their_scene_index():
    assert [step_family(s) for s in ("outline", "scene:0:content", "scene:12:actions", "media:3", "turn")] == [
        "outline", "scene:content", "scene:actions", "media", "turn"]  # fmt: skip


def test_timed_observes_with_the_outcome_the_block_settles():
    reg = CollectorRegistry()
    h = Histogram("demo_seconds", "Demo.", ("kind", "outcome"), registry=reg)
    plain = Histogram("plain_seconds", "Demo.", registry=reg)
    with timed(h, kind="a"):
        pass
    with timed(h, kind="a") as seen:
        seen["outcome"] = "refused"
    with pytest.raises(KeyError), timed(h, kind="a"):
        raise KeyError("x")
    with pytest.raises(KeyError), timed(plain):
        raise KeyError("x")

    def count(name: str, **labels: str) -> float | None:
        return reg.get_sample_value(name, labels)

    assert [count("demo_seconds_count", kind="a", outcome=o) for o in ("ok", "refused", "error")] == [1, 1, 1]
    assert count("plain_seconds_count") == 1


def test_the_admin_listener_is_on_by_default_only_where_the_api_does_not_serve_the_probes():
    defaults = parse_config("", source="<test>", env={})
    assert admin_port(["worker"], None, defaults) == DEFAULT_ADMIN_PORT
    assert admin_port(["worker", "projector"], None, defaults) == DEFAULT_ADMIN_PORT
    assert admin_port(["api", "worker"], None, defaults) is None
    assert admin_port(["api"], 9100, defaults) == 9100  # the flag wins
    configured = parse_config("server: {admin_port: 9200}", source="<test>", env={})
    assert admin_port(["api"], None, configured) == 9200
    assert admin_port(["worker"], 9300, configured) == 9300
    from_env = parse_config("server: {admin_port: 9200}", source="<test>", env={"OPENMAIC_ADMIN_PORT": "9400"})
    assert admin_port(["projector"], None, from_env) == 9400


class _Scripted:
    def __init__(self, name: str, outcome: object) -> None:
        self.name, self.outcome = name, outcome

    async def complete(self, model, messages, output_type, *, on_delta=None, on_retry=None):
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


async def test_a_routed_call_observes_primary_and_fallback_each_under_its_own_provider():
    def seen(provider: str, outcome: str) -> float:
        return sample("openmaic_provider_call_duration_seconds_count", provider=provider, call="complete",
                      outcome=outcome)

    def fallbacks(outcome: str) -> float:
        return sample("openmaic_model_fallbacks_total", slot="course.outline", outcome=outcome)

    before = [seen("px", "error"), seen("fx", "ok"), seen("fx", "error"), fallbacks("answered"), fallbacks("failed")]
    down = ProviderError("the model provider 'px' failed after 1 attempt (HTTP 503)")
    routed = RoutedProvider("course.outline", _Scripted("px", down), "px:a",  # type: ignore[arg-type]
                            (_Scripted("fx", "answer"), "b", "fx:b"))  # type: ignore[arg-type]
    assert await routed.complete("a", [], str) == "answer"
    both = RoutedProvider("course.outline", _Scripted("px", down), "px:a",  # type: ignore[arg-type]
                          (_Scripted("fx", ProviderError("down too")), "b", "fx:b"))  # type: ignore[arg-type]
    with pytest.raises(ProviderError):
        await both.complete("a", [], str)
    after = [seen("px", "error"), seen("fx", "ok"), seen("fx", "error"), fallbacks("answered"), fallbacks("failed")]
    assert [a - b for a, b in zip(after, before, strict=True)] == [2, 1, 1, 1, 1]


def test_an_owners_own_provider_is_labelled_by_its_preset_not_its_id():
    config = default_config()
    mine = ModelLayer(source="workspace", providers={"my-secret-box-17": ProviderSpec(preset="openai")},
                      slots={"llm": "my-secret-box-17:gpt-x"})
    owned = resolve("course.outline", config.layers(mine)).target
    builtin = resolve("course.outline", config.layers()).target
    assert owned is not None and builtin is not None
    assert (provider_label(owned), provider_label(builtin)) == ("owner:openai", "demo")
