"""Errors of the model layer. Their messages are fixed and never carry keys, headers or response bodies."""

from __future__ import annotations

from openmaic.errors import OpenMaicError


class ProviderError(OpenMaicError):
    """The model provider failed."""

    code = "provider_error"
    status = 502


class OutputInvalid(ProviderError):
    """The model's reply did not match the requested structure."""

    code = "output_invalid"


class ModelNotReady(OpenMaicError):
    """A model slot cannot run with this server's configuration."""

    code = "model_not_ready"
    status = 400


class MissingModel(ModelNotReady):
    """No model is assigned to this slot (or it is turned off, or lacks what the slot needs)."""

    code = "missing_model"
    error_code = "MISSING_MODEL"


class MissingApiKey(ModelNotReady):
    """The slot's provider needs an API key and has none."""

    code = "missing_api_key"
    error_code = "MISSING_API_KEY"
