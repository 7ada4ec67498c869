"""`exo` command line."""
