"""The thesis's test bed (Chapter 4) as numbers, what its text claims, and the targets this
project set itself against it (issue 11). Everything here is a constant; both back ends read it.
"""
from __future__ import annotations

THESIS = {
    "db_nodes": 32,
    "node_rps": 72_200,          # each emulated wimpy's limit (4.2)
    "keys": 100_000_000,
    "key_size": 16,
    "value_size": 512,
    "rule_updates_per_s": 50,    # Pica8 P3922 L2 updates (4.1.2)
    "cache_entries": 1000,       # Figures 4.1 and 4.2
    "swap_keys": 50,             # Figure 4.4
    "swap_every_s": 50,
    "max_loss": 0.05,            # "a constant packet loss of approximately 5%"
}

THESIS_CLAIMS = {  # what Chapter 4's text states (the figures' data are not in the text)
    "gain_0.995": 5.0,             # "increases cluster throughput by almost 5x"
    "cache_bound_entries": 15000,  # "when our cache contains 15,000 entries ... wimpy nodes underutilized"
    "recovery_s_mean": 2.5,        # Figure 4.4 caption
}

TARGETS = {
    "gain_strict_alpha": "0.995", "gain_strict_min": 4.0,     # measured gain at 0.1% loss
    "min_utilisation_cache_alpha_ge_0.99": 0.90,               # least busy db node, with cache
    "recovery_s_strict_mean_lt": 1.0,                          # and every swap recovered
}
