"""Fakes of external services, served over real sockets."""
