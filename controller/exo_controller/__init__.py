"""Exoskeleton controller: cluster config, pure rule logic, and the thin os-ken app."""
