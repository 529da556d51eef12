"""Actors: per-stream tasks that fold their events and act only while they hold a fenced lease."""
