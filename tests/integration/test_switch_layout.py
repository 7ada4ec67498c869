"""The cluster's rule layout keeps GETs that miss the cache out of Open vSwitch's slow path, on a
real OVS bridge: `ofproto/trace` shows the datapath flow ("megaflow") each request would install,
and the check is that a miss's flow pins few key-hash bits (many keys share one flow) while a
hot key's flow still sends it to the cache node. The same check run on the thesis's layout
(exact-MAC Ruleset 2) must fail: every key gets its own flow there (docs/switch-rules.md)."""
from __future__ import annotations

import os
import random
import subprocess

import pytest

from exo_bench import ovs_rules
from exo_topo import megaflow, ovs
from exoskeleton.keyhash import PREFIX_FORWARDED, PREFIX_GET, PREFIX_OTHER, key_hash

pytestmark = pytest.mark.mininet  # root and Open vSwitch, no Mininet cluster

CLIENT_MAC, SRV_MAC = "02:00:00:00:0c:01", "02:00:00:00:0a:01"
HOT = [f"hot-{i}".encode() for i in range(2000)]
# At most this many of the 40 hash bits may be pinned by a miss's datapath flow: 2^16 keys or
# more share it. Measured on this layout: 10 partition bits + the trie's ~12-14 IP bits, which
# overlap (both are the hash's top bits), so about 14-16.
MAX_PINNED_BITS_MISS = 24


@pytest.fixture
def bridge():
    ovs.ensure_running()
    name = f"exo-lay{os.getpid() % 100000}"
    ovs.delete_bridge(name)
    subprocess.run(["ovs-vsctl", "--timeout=10", "add-br", name, "--", "set", "bridge", name,
                    "datapath_type=netdev", "protocols=OpenFlow13", "fail-mode=secure"], check=True)
    for port in (ovs_rules.GEN_PORT, ovs_rules.SRV_PORT):
        subprocess.run(["ovs-vsctl", "--timeout=10", "add-port", name, f"{name}p{port}", "--", "set",
                        "Interface", f"{name}p{port}", "type=internal", f"ofport_request={port}"], check=True)
    try:
        yield name
    finally:
        ovs.delete_bridge(name)


def pinned_bits_of_misses(bridge: str, layout: str, n: int = 200) -> list[int]:
    ovs_rules.load_cluster(bridge, CLIENT_MAC, SRV_MAC, HOT, layout)
    rnd = random.Random(7)
    out = []
    for _ in range(n):
        key = f"cold-{rnd.getrandbits(48)}".encode()
        for prefix in (PREFIX_GET, PREFIX_FORWARDED, PREFIX_OTHER):  # a GET, a forwarded GET, a write
            mf = megaflow.trace(bridge, megaflow.request_flow(ovs_rules.GEN_PORT, CLIENT_MAC, "10.0.0.1",
                                                              prefix, key_hash(key), 7777))
            assert mf.actions != "drop", mf.line
            out.append(mf.hash_bits_pinned())
    return out


def test_misses_share_datapath_flows(bridge):
    pinned = pinned_bits_of_misses(bridge, "exo")
    assert max(pinned) <= MAX_PINNED_BITS_MISS, sorted(pinned)[-5:]
    # a hot key still gets its exact rule (its flow pins the IP's 32 hash bits)
    for key in HOT[:20]:
        mf = megaflow.trace_key(bridge, ovs_rules.GEN_PORT, CLIENT_MAC, "10.0.0.1", key, 7777)
        assert mf.nw_dst_mask == 0xFFFF_FFFF and mf.actions != "drop", mf.line
    # replies to the client: Ruleset 1 (exact MAC), unchanged
    reply = megaflow.trace(bridge, f"in_port={ovs_rules.SRV_PORT},udp,dl_src={SRV_MAC},dl_dst={CLIENT_MAC},"
                                   "nw_src=10.0.0.2,nw_dst=10.0.0.1,udp_src=7777,udp_dst=40000")
    assert reply.actions != "drop" and reply.dl_dst_mask == (1 << 48) - 1


def test_check_rejects_the_thesis_layout(bridge):
    """The known-bad input: with an exact-MAC Ruleset 2 every miss pins all 40 hash bits."""
    pinned = pinned_bits_of_misses(bridge, "thesis", n=50)
    assert min(pinned) == 40
    assert not max(pinned) <= MAX_PINNED_BITS_MISS


def test_parse_trace_reads_masks():
    out = ("Megaflow: recirc_id=0,eth,ip,in_port=1,dl_dst=aa:12:00:00:00:00/ff:ff:c0:00:00:00,"
           "nw_dst=18.52.0.0/14,nw_frag=no\nDatapath actions: 4\n")
    mf = megaflow.parse_trace(out)
    assert mf.actions == "4" and mf.nw_dst_mask == 0xFFFC_0000
    assert mf.hash_bits_pinned() == 14  # MAC hash bits 39..30 are inside the IP's 39..26
    with pytest.raises(ValueError):
        megaflow.parse_trace("no trace here")
