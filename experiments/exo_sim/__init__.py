"""A fluid simulator of an Exoskeleton cluster at the thesis's scale and beyond (docs/simulator.md).

It reproduces thesis Figures 4.1-4.4 and a scale study with the project's own logic: the cache
node's C++ select_keys (through ctypes, selector.py), the controller's RuleUpdater
(exo_controller.rule_updater), the controller's partition table and the cluster's key hash.

    zipf.py         Zipf probabilities without materialising n keys; the hot-set swap
    placement.py    key names, key hashes, consistent hashing onto db nodes
    throughput.py   the loss rules (5% and 0%) by bisection over the offered rate
    baselines.py    no cache, Exoskeleton, look-aside, read-through front-end, ideal
    model.py        the static cluster (figs 4.1-4.3, scale study)
    selector.py     ctypes loader of exo_selector_capi
    detector.py     the db nodes' sampled Space-Saving detectors and REPORTs
    dynamic.py      the fill loop on a simulated clock (fig 4.4)
    static_figs.py, fig_dynamic.py, scale.py, plots.py, figures.py   figures and the CLI
    replication.py  the replicated layout (chains of db nodes): spread, Ruleset 3 rules, flow-mods per failure
"""
