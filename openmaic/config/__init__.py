"""Configuration: ``openmaic.yml`` decoded strictly into one frozen tree, plus ``OPENMAIC_*`` overrides.

The file is found through ``OPENMAIC_CONFIG``, else ``./openmaic.yml``, else the built-in defaults. Its model
sections — ``providers``, ``slots``, ``policy`` — are OpenMAIC 1.2's, accepted exactly as OpenMAIC writes them
(:mod:`openmaic.modelconfig.layer`); this project's own sections (``runtime``, ``server``, ``limits``,
``identity``, ``database``) extend the file and are just as strict. String values may reference environment
variables as ``${NAME}`` (unset or empty is an error); ``$${`` is a literal ``${``. A few keys can be overridden
from the environment after the file is read (see ``ENV_OVERRIDES``).

Where the models come from (``Config.model_source``):

* ``openmaic.yml`` — the file declares providers, slots or policy. Its slots lock what they set; the legacy
  environment is ignored (a notice says so).
* ``environment`` — no model sections, but the environment configures models the legacy way
  (``OPENAI_API_KEY``, ``server-providers.yml``, ``DEFAULT_MODEL`` …; :mod:`openmaic.modelconfig.legacy`).
  ``MODEL_ROUTES`` stops the boot with what to write instead.
* ``built-in`` — nothing configured: the offline ``demo`` provider answers every slot, as a default an owner's
  own settings may override.

Anything invalid raises :class:`~openmaic.errors.ConfigError` naming the key path and what was expected, e.g.
``runtime.lease_ttl_s: expected a number > 0, got -1``. API keys are held in :class:`Secret` and never appear
in a repr, a str, or an error message.

The tree is :mod:`openmaic.config.schema`; reading it is :mod:`openmaic.config.loader`.
"""

from __future__ import annotations

from openmaic.config.loader import load_config, parse_config
from openmaic.config.schema import (
    DEFAULT_SLOTS, ENV_OVERRIDES, KNOWN_SLOTS, SLOT_PARENTS, Config, DatabaseConfig, ExtractionLimits, IdentityConfig,
    LimitsConfig, ProviderConfig, ProviderSpec, Route, RuntimeConfig, Secret, ServerConfig, StepDeadlines,
    default_config,
)  # fmt: skip

__all__ = [
    "DEFAULT_SLOTS", "ENV_OVERRIDES", "KNOWN_SLOTS", "SLOT_PARENTS", "Config", "DatabaseConfig", "ExtractionLimits",
    "IdentityConfig", "LimitsConfig", "ProviderConfig", "ProviderSpec", "Route", "RuntimeConfig", "Secret",
    "ServerConfig", "StepDeadlines", "default_config", "load_config", "parse_config",
]  # fmt: skip
