"""The Mininet topology of an Exoskeleton cluster, built from its config.

                         os-ken controller (root namespace, OpenFlow 1.3 on 127.0.0.1)
                                   |
      client0 ---+                 |                 +--- cache0
      client1 ---+----------[ OVS exo-s1 ]-----------+--- cache1
                              |  |  |  |
                            db0 db1 db2 db3

Every node is a Mininet host (a network namespace) named as in the config, with the config's
MAC and IP on <name>-eth0, linked to the switch port the config gives it. Db nodes hosted by
a wimpy emulator (`db_nodes[].emulator`) share one host named after the emulator; its interface
carries the first such node's MAC (the emulator answers with each node's own MAC). The switch is OVS
with the userspace datapath, OpenFlow 1.3 only, fail-mode secure (it never floods on its own).
"""
from __future__ import annotations

from mininet.topo import Topo

from exo_common.config import ClusterConfig


class ExoTopo(Topo):
    def build(self, cfg: ClusterConfig) -> None:  # type: ignore[override]
        sw = self.addSwitch(cfg.switch.bridge, dpid=f"{cfg.switch.dpid:016x}")
        emulators: set[str] = set()
        for node in [*cfg.cache_nodes, *cfg.db_nodes, *cfg.clients]:
            name = getattr(node, "emulator", None) or node.name
            if name in emulators:
                continue
            if name != node.name:
                emulators.add(name)
            host = self.addHost(name, ip=f"{node.ip}/8", mac=node.mac)
            self.addLink(host, sw, port2=node.switch_port)
