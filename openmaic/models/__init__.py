"""Model providers: one wire-neutral interface over OpenAI, Anthropic and an offline demo.

``ModelRouter(config).for_slot("course.outline")`` gives a ``(provider, model)`` pair; a provider streams chat
turns with tool calls (``stream_turn``) and produces validated structured outputs (``complete``).
"""

from openmaic.models.errors import OutputInvalid, ProviderError
from openmaic.models.provider import ModelRouter, Provider, build_provider, open_model_router
from openmaic.models.types import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    TurnResult,
    UserMessage,
)

__all__ = [
    "AssistantMessage",
    "Message",
    "ModelRouter",
    "OutputInvalid",
    "Provider",
    "ProviderError",
    "SystemMessage",
    "ToolCall",
    "ToolResultMessage",
    "ToolSpec",
    "TurnResult",
    "UserMessage",
    "build_provider",
    "open_model_router",
]
