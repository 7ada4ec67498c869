"""Mininet topology and cluster lifecycle for Exoskeleton."""
