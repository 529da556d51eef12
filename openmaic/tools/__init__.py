"""Operator tools behind the CLI: stream replay and audit export/verify."""
