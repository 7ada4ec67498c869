"""Exoskeleton client library: `from exoskeleton import Client`."""
