"""Owners: claims of anonymous owners by accounts, and the one-way import of a 1.1.x browser's data."""
