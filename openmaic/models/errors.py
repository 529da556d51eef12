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
