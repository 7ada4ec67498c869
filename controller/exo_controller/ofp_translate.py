"""The only place that maps our plain FlowMod / flow-stats data to and from os-ken OpenFlow 1.3 objects."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from .flows import ADD, DELETE, DELETE_STRICT, FlowMod, int_to_ip, int_to_mac, mac_to_int, ruleset_of_cookie
from .ingress import MeterMod

_COMMANDS = {ADD: ofp.OFPFC_ADD, DELETE: ofp.OFPFC_DELETE, DELETE_STRICT: ofp.OFPFC_DELETE_STRICT}
_METER_COMMANDS = {ADD: ofp.OFPMC_ADD, DELETE: ofp.OFPMC_DELETE}
# Our meters count frames (not bits), take an explicit burst, and keep statistics (meter stats
# are the hygiene's counter of frames over the rate).
METER_FLAGS = ofp.OFPMF_PKTPS | ofp.OFPMF_BURST | ofp.OFPMF_STATS


def to_match(fm: FlowMod) -> parser.OFPMatch:
    fields = {}
    if fm.in_port is not None:
        fields["in_port"] = fm.in_port
    if fm.eth_type is not None:
        fields["eth_type"] = fm.eth_type
    if fm.eth_src is not None:
        fields["eth_src"] = int_to_mac(fm.eth_src)
    if fm.eth_dst is not None:
        dst = int_to_mac(fm.eth_dst)
        fields["eth_dst"] = (dst, int_to_mac(fm.eth_dst_mask)) if fm.eth_dst_mask is not None else dst
    if fm.ip_dscp is not None:
        fields["ip_dscp"] = fm.ip_dscp
    if fm.ipv4_src is not None:
        fields["ipv4_src"] = int_to_ip(fm.ipv4_src)
    if fm.ipv4_dst is not None:
        fields["ipv4_dst"] = int_to_ip(fm.ipv4_dst)
    if fm.arp_spa is not None:
        fields["arp_spa"] = int_to_ip(fm.arp_spa)
    if fm.arp_sha is not None:
        fields["arp_sha"] = int_to_mac(fm.arp_sha)
    return parser.OFPMatch(**fields)


def _instructions(fm: FlowMod) -> list:
    """In the order OpenFlow 1.3 executes them: meter, apply-actions, goto-table. A drop rule
    has none (its packet count still counts what it dropped)."""
    if fm.drop:
        if fm.out_port is not None or fm.goto_table is not None or fm.meter_id is not None:
            raise ValueError(f"a drop rule with actions: {fm}")
        return []
    if fm.out_port is None and fm.goto_table is None:
        raise ValueError(f"ADD without out_port, goto_table or drop: {fm}")
    out = []
    if fm.meter_id is not None:
        out.append(parser.OFPInstructionMeter(fm.meter_id, ofp.OFPIT_METER))
    actions = []
    if fm.set_ip_dscp is not None:
        actions.append(parser.OFPActionSetField(ip_dscp=fm.set_ip_dscp))
    if fm.out_port is not None:
        actions.append(parser.OFPActionOutput(fm.out_port, 0))
    if actions:
        out.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions))
    if fm.goto_table is not None:
        out.append(parser.OFPInstructionGotoTable(fm.goto_table))
    return out


def to_ofp(datapath, fm):
    """FlowMod -> OFPFlowMod, MeterMod -> OFPMeterMod, for `datapath` (OpenFlow 1.3)."""
    if isinstance(fm, MeterMod):
        return to_meter_mod(datapath, fm)
    command = _COMMANDS[fm.command]
    instructions = _instructions(fm) if command == ofp.OFPFC_ADD else []
    return parser.OFPFlowMod(
        datapath=datapath,
        cookie=fm.cookie,
        cookie_mask=fm.cookie_mask if command == ofp.OFPFC_DELETE else 0,
        table_id=ofp.OFPTT_ALL if command == ofp.OFPFC_DELETE and fm.all_tables else fm.table,
        command=command,
        priority=fm.priority,
        # SEND_FLOW_REM off; CHECK_OVERLAP off (Ruleset 2 and 3 overlap by design, priorities decide).
        flags=0,
        # For deletes, out_port is OpenFlow's filter: only flows that output to it (a withdrawal).
        out_port=fm.out_port if command != ofp.OFPFC_ADD and fm.out_port is not None else ofp.OFPP_ANY,
        out_group=ofp.OFPG_ANY,
        match=to_match(fm),
        instructions=instructions,
    )


def to_meter_mod(datapath, mm: MeterMod) -> parser.OFPMeterMod:
    bands = [parser.OFPMeterBandDrop(rate=mm.rate_pps, burst_size=mm.burst)] if mm.command == ADD else []
    return parser.OFPMeterMod(datapath, command=_METER_COMMANDS[mm.command],
                              flags=METER_FLAGS if mm.command == ADD else 0, meter_id=mm.meter_id, bands=bands)


@dataclass(frozen=True)
class FlowInfo:
    """A flow as read back from the switch (OFPFlowStats), library-independent."""
    ruleset: int  # 0 when the cookie is not ours
    priority: int
    eth_dst: str
    eth_dst_mask: str  # "" when exact
    out_port: Optional[int]
    packet_count: int
    byte_count: int
    cookie: int
    eth_type: Optional[int] = None
    ipv4_dst: str = ""  # "" when not matched (Ruleset 2 matches it exactly)
    table_id: int = 0
    # Nothing beyond what we program (see _is_plain); flows.plan_table compares the rest.
    plain: bool = True
    # table 0 (ingress.py): "" / None when not matched or not done
    in_port: Optional[int] = None
    eth_src: str = ""
    ipv4_src: str = ""
    ip_dscp: Optional[int] = None
    arp_spa: str = ""
    arp_sha: str = ""
    meter_id: Optional[int] = None
    set_ip_dscp: Optional[int] = None
    goto_table: Optional[int] = None


_PLAIN_MATCH = {"in_port", "eth_dst", "eth_src", "eth_type", "ipv4_dst", "ipv4_src", "ip_dscp", "arp_spa", "arp_sha"}
_EXACT_ONLY = ("eth_src", "ipv4_dst", "ipv4_src", "arp_spa", "arp_sha")  # we never mask these


def _is_plain(stat) -> bool:
    """Only what we program: those match fields (the ones in _EXACT_ONLY exact), no timeouts, at
    most one meter, one apply-actions (set_field ip_dscp and/or one output) and one goto-table."""
    if getattr(stat, "idle_timeout", 0) or getattr(stat, "hard_timeout", 0):
        return False
    if {name for name, _ in stat.match.items()} - _PLAIN_MATCH:
        return False
    if any(isinstance(stat.match.get(name), tuple) for name in _EXACT_ONLY):
        return False
    kinds = []
    for inst in stat.instructions:
        if isinstance(inst, parser.OFPInstructionMeter):
            kinds.append("meter")
        elif isinstance(inst, parser.OFPInstructionGotoTable):
            kinds.append("goto")
        elif isinstance(inst, parser.OFPInstructionActions) and inst.type == ofp.OFPIT_APPLY_ACTIONS:
            kinds.append("apply")
            outputs = [a for a in inst.actions if isinstance(a, parser.OFPActionOutput)]
            sets = [a for a in inst.actions if isinstance(a, parser.OFPActionSetField)]
            if len(outputs) > 1 or len(sets) > 1 or len(outputs) + len(sets) != len(inst.actions) or not inst.actions:
                return False
            if sets and sets[0].key != "ip_dscp":
                return False
        else:
            return False
    return len(kinds) == len(set(kinds))


def _exact(value, fmt=str.lower) -> str:
    return fmt(value) if isinstance(value, str) else ""


def from_stats(stat) -> FlowInfo:
    """OFPFlowStats -> FlowInfo."""
    dst = stat.match.get("eth_dst")
    mask = ""
    if isinstance(dst, tuple):
        dst, mask = dst
        # an all-ones mask is an exact match
        if mac_to_int(mask) == (1 << 48) - 1:
            mask = ""
    out_port = meter_id = set_dscp = goto = None
    for inst in stat.instructions:
        if isinstance(inst, parser.OFPInstructionMeter):
            meter_id = inst.meter_id
        elif isinstance(inst, parser.OFPInstructionGotoTable):
            goto = inst.table_id
        for action in getattr(inst, "actions", []) or []:
            if isinstance(action, parser.OFPActionOutput) and out_port is None:
                out_port = action.port
            elif isinstance(action, parser.OFPActionSetField) and action.key == "ip_dscp":
                set_dscp = action.value
    return FlowInfo(
        ruleset=ruleset_of_cookie(stat.cookie) or 0,
        priority=stat.priority,
        eth_dst=(dst or "").lower(),
        eth_dst_mask=mask.lower(),
        out_port=out_port,
        packet_count=stat.packet_count,
        byte_count=stat.byte_count,
        cookie=stat.cookie,
        eth_type=stat.match.get("eth_type"),
        ipv4_dst=_exact(stat.match.get("ipv4_dst", "")),
        table_id=getattr(stat, "table_id", 0),
        plain=_is_plain(stat),
        in_port=stat.match.get("in_port"),
        eth_src=_exact(stat.match.get("eth_src", "")),
        ipv4_src=_exact(stat.match.get("ipv4_src", "")),
        ip_dscp=stat.match.get("ip_dscp"),
        arp_spa=_exact(stat.match.get("arp_spa", "")),
        arp_sha=_exact(stat.match.get("arp_sha", "")),
        meter_id=meter_id,
        set_ip_dscp=set_dscp,
        goto_table=goto,
    )


def meter_from_config(stat) -> MeterMod:
    """OFPMeterConfigStats -> the MeterMod ADD that would make it (flows.plan_table compares
    them with ours). A meter that is not one packets/s drop band with burst and stats is
    returned with rate 0, which matches none of ours."""
    bands = list(stat.bands or [])
    ok = stat.flags == METER_FLAGS and len(bands) == 1 and isinstance(bands[0], parser.OFPMeterBandDrop)
    if not ok:
        return MeterMod(ADD, stat.meter_id, 0, 0)
    return MeterMod(ADD, stat.meter_id, bands[0].rate, bands[0].burst_size)


def meter_drops(stats) -> dict[int, int]:
    """OFPMeterStats list -> meter id -> frames its bands dropped."""
    return {m.meter_id: sum(b.packet_band_count for b in (m.band_stats or [])) for m in stats}


def error_text(msg) -> str:
    """'OFPET_FLOW_MOD_FAILED(5)/OFPFMFC_TABLE_FULL(1)' for an OFPErrorMsg."""
    return f"{ofp.ofp_error_type_to_str(msg.type)}/{ofp.ofp_error_code_to_str(msg.type, msg.code)}"
