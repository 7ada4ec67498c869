"""The only place that maps our plain FlowMod / flow-stats data to and from os-ken OpenFlow 1.3 objects."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from .flows import ADD, DELETE, DELETE_STRICT, FlowMod, int_to_ip, int_to_mac, mac_to_int, ruleset_of_cookie

TABLE = 0

_COMMANDS = {ADD: ofp.OFPFC_ADD, DELETE: ofp.OFPFC_DELETE, DELETE_STRICT: ofp.OFPFC_DELETE_STRICT}


def to_match(fm: FlowMod) -> parser.OFPMatch:
    fields = {}
    if fm.eth_type is not None:
        fields["eth_type"] = fm.eth_type
    if fm.eth_dst is not None:
        dst = int_to_mac(fm.eth_dst)
        fields["eth_dst"] = (dst, int_to_mac(fm.eth_dst_mask)) if fm.eth_dst_mask is not None else dst
    if fm.ipv4_dst is not None:
        fields["ipv4_dst"] = int_to_ip(fm.ipv4_dst)
    return parser.OFPMatch(**fields)


def to_ofp(datapath, fm: FlowMod) -> parser.OFPFlowMod:
    """FlowMod -> OFPFlowMod for `datapath` (OpenFlow 1.3, table 0)."""
    command = _COMMANDS[fm.command]
    instructions = []
    if command == ofp.OFPFC_ADD:
        if fm.out_port is None:
            raise ValueError(f"ADD without out_port: {fm}")
        actions = [parser.OFPActionOutput(fm.out_port, 0)]
        instructions = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
    return parser.OFPFlowMod(
        datapath=datapath,
        cookie=fm.cookie,
            cookie_mask=fm.cookie_mask if command == ofp.OFPFC_DELETE else 0,
        table_id=ofp.OFPTT_ALL if command == ofp.OFPFC_DELETE and fm.all_tables else TABLE,
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
    # Nothing beyond what we program: match on eth_dst/eth_type/ipv4_dst only, one apply-actions
    # instruction with one output action, no timeouts (flows.plan_table compares the rest).
    plain: bool = True


_PLAIN_MATCH = {"eth_dst", "eth_type", "ipv4_dst"}


def _is_plain(stat) -> bool:
    if getattr(stat, "idle_timeout", 0) or getattr(stat, "hard_timeout", 0):
        return False
    if {name for name, _ in stat.match.items()} - _PLAIN_MATCH:
        return False
    if isinstance(stat.match.get("ipv4_dst"), tuple):  # we only ever match it exactly
        return False
    if len(stat.instructions) != 1:
        return False
    inst = stat.instructions[0]
    if not isinstance(inst, parser.OFPInstructionActions) or inst.type != ofp.OFPIT_APPLY_ACTIONS:
        return False
    return len(inst.actions) == 1 and isinstance(inst.actions[0], parser.OFPActionOutput)


def from_stats(stat) -> FlowInfo:
    """OFPFlowStats -> FlowInfo."""
    dst = stat.match.get("eth_dst")
    mask = ""
    if isinstance(dst, tuple):
        dst, mask = dst
        # an all-ones mask is an exact match
        if mac_to_int(mask) == (1 << 48) - 1:
            mask = ""
    out_port = None
    for inst in stat.instructions:
        for action in getattr(inst, "actions", []) or []:
            if isinstance(action, parser.OFPActionOutput):
                out_port = action.port
                break
        if out_port is not None:
            break
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
        ipv4_dst=ip if isinstance(ip := stat.match.get("ipv4_dst", ""), str) else "",
        table_id=getattr(stat, "table_id", 0),
        plain=_is_plain(stat),
    )


def error_text(msg) -> str:
    """'OFPET_FLOW_MOD_FAILED(5)/OFPFMFC_TABLE_FULL(1)' for an OFPErrorMsg."""
    return f"{ofp.ofp_error_type_to_str(msg.type)}/{ofp.ofp_error_code_to_str(msg.type, msg.code)}"
