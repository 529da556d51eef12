"""Transport settings of providers: an owner-added endpoint waits less and retries less than the deployment's."""

from __future__ import annotations

from openmaic.config import Secret
from openmaic.modelconfig.layer import ModelLayer, ProviderSpec
from openmaic.modelconfig.resolve import target_for
from openmaic.models.provider import OPERATOR_MAX_RETRIES, OPERATOR_TIMEOUT_S, endpoint


def spec(**options: float) -> ProviderSpec:
    return ProviderSpec(preset="openai-compatible", api_key=Secret("sk-x"), base_url="https://llm.example.org/v1",
                        models=("m1",), options=dict(options))


def transport(source: str, **options: float) -> tuple[float, int]:
    layer = ModelLayer(source=source, providers={"p": spec(**options)})  # type: ignore[arg-type]
    cfg = endpoint(target_for("p:m1", "chat", [layer], "course.outline"))
    return cfg.timeout_s, cfg.max_retries


def test_owner_added_endpoints_have_shorter_defaults_and_capped_options():
    assert transport("deployment") == (OPERATOR_TIMEOUT_S, OPERATOR_MAX_RETRIES) == (60.0, 4)
    assert transport("deployment", timeoutS=600, maxRetries=9) == (600.0, 9)  # the operator's choice stands
    assert transport("workspace") == (30.0, 1)
    assert transport("workspace", timeoutS=5, maxRetries=0) == (5.0, 0)  # shorter is the owner's to choose
    assert transport("workspace", timeoutS=600, maxRetries=9) == (60.0, 2)  # longer is not
