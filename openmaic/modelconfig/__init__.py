"""Model configuration: OpenMAIC 1.2's slots, presets and ``openmaic.yml`` model sections, the translation of
environment-only deployments, slot resolution, and the owners' settings with their sealed keys.

Modules, from the bottom up: :mod:`~openmaic.modelconfig.slots` (the slot tree), :mod:`~.presets`,
:mod:`~.layer` (decoding ``providers``/``slots``/``policy``), :mod:`~.legacy` (the environment),
:mod:`~.resolve` (which provider answers a slot), :mod:`~.secret_box` (AES-256-GCM sealing) and
:mod:`~.store` (the ``model_settings`` table). Nothing here imports the rest of the package eagerly.
"""
