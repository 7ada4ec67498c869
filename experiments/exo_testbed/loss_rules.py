"""The loss rules a throughput is read under, one definition for both back ends.

A system's throughput "under rule L" is what it answers at the highest offered rate whose loss is
at most L. The thesis's rule is L = 5% ("a constant packet loss of approximately 5%", 4.2); the
strict rule L = 0.1% is this project's (issue 11): under 5% one overloaded db node may drop its
whole overload and still count as a valid run. The simulator, a fluid model, can also apply
L = 0 exactly (no server over capacity); no measurement can, so that rule is the model's only.

How each back end finds the point differs and is its own: the Mininet figures interpolate between
two measured runs that bracket L (exo_figures.throughput); the simulator bisects its model
(exo_sim.throughput.max_rate). The record (record.py) keys every point by rule_key(L).
"""
from __future__ import annotations

THESIS_LOSS = 0.05
STRICT_LOSS = 0.001
ZERO_LOSS = 0.0

MEASURED_RULES = (THESIS_LOSS, STRICT_LOSS)            # what the Mininet figures measure
MODEL_RULES = (THESIS_LOSS, STRICT_LOSS, ZERO_LOSS)    # what the simulator computes


def rule_key(max_loss: float) -> str:
    """The JSON key of a loss rule: "0.05", "0.001", "0"."""
    return f"{max_loss:g}"


DESCRIPTION = {
    rule_key(THESIS_LOSS): "the thesis's rule: loss at most 5% of the offered rate",
    rule_key(STRICT_LOSS): "strict: loss at most 0.1% of the offered rate",
    rule_key(ZERO_LOSS): "no server over capacity (a fluid model's rule; no measurement can apply it)",
}
