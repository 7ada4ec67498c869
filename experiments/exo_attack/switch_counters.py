"""The switch's own refusal counters, as the controller reads them back from table 0 every
second (controller/exo_controller/ingress.py, counters(): drop-rule packet counts and meter band
drops, per client) and reports them in its Stats."""
from __future__ import annotations

import time

from exo_controller.ingress import client_meter_id, meter_burst
from exo_topo.ovs import meter_stats

POLL_S = 1.0  # the controller's ingress poll period (controller/exo_controller/main.py)


def settle() -> None:
    """Wait until the controller has read the switch at least once more."""
    time.sleep(POLL_S * 1.5)


def rule_packets(cl, kind: str, client: str) -> int:
    """Frames table 0's `kind` drop rule (client_source, client_forwarded, ...) dropped from `client`'s port."""
    return int(cl.stubs.controller_stats()[f"ingress_{kind}_dropped {client}"])


def meter_drops(cl, client: str) -> int:
    return int(cl.stubs.controller_stats()[f"ingress_meter_dropped {client}"])


def meter_in_and_dropped(cfg, client: str) -> tuple[int, int]:
    """(frames that reached `client`'s port meter, frames it dropped), from the switch itself."""
    return meter_stats(cfg.switch.bridge, client_meter_id(cfg, client))


def meter_allowance(cfg, seconds: float) -> int:
    """Frames a client's meter lets through in `seconds` (the flood's length plus a second for the
    frames still queued when it stopped): its rate times the time, plus its burst."""
    pps = cfg.switch.client_meter_pps
    return int(pps * seconds) + meter_burst(pps)
