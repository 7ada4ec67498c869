"""Thesis Chapter 4 on a real Mininet/OVS cluster: Figures 4.1-4.4 (docs/figures.md)."""
