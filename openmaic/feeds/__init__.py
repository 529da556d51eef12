"""Serving the log live: what the API's streaming routes follow once a client has caught up.

A level below the API and above the log: it uses only the event log, the wake-ups and the metrics, and knows
nothing of HTTP, WebSocket or SSE. :mod:`openmaic.feeds.live` holds the per-stream feeds.
"""
