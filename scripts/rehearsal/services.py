"""Steps 6-9 of docs/deploy.md: the controller, the db nodes, the cache nodes and the proxy, each
started from its installed unit file (units.py, launcher.py) on its machine, waited for until it
answers, and checked to run as its unit's user with exactly its unit's capabilities. Also how to
tell that a restarted service is back (checks.py restarts each one).
"""
from __future__ import annotations

import pwd
import socket

import units
from launcher import Service
from run_state import CONTROLLER_HOST, PREFIX, Run, StepFailed, wait_for

PROXY_ENV = "/etc/exo/exo-proxy.env"


def start_unit(r: Run, unit_file: str, instance: str, machine: str) -> Service:
    env_files = {}
    if (r.root / PROXY_ENV.lstrip("/")).exists():
        env_files[PROXY_ENV] = (r.root / PROXY_ENV.lstrip("/")).read_text()
    unit = units.parse(r.root / "usr/lib/systemd/system" / unit_file)
    svc = Service(units.launch(unit, instance, r.root, env_files), r.lab.netns(machine),
                  r.work / "logs" / f"{unit_file.replace('@.service', '@' + instance)}.log")
    svc.log_path.parent.mkdir(parents=True, exist_ok=True)
    if not r.services:
        r.lab.on_teardown("services", lambda: stop_services(r))
    r.services[svc.name] = svc
    svc.start()
    return svc


def stop_services(r: Run) -> None:
    for svc in reversed(list(r.services.values())):
        svc.stop(grace=3.0)


def check_identity(svc: Service) -> dict:
    """The running service is the unit's user with exactly the unit's capabilities."""
    got = svc.identity()
    want_uid = pwd.getpwnam(svc.launch.user).pw_uid
    caps = sorted(svc.launch.ambient_caps)
    if (got["uid"], got["cap_eff"], got["cap_bnd"], got["no_new_privs"]) != (want_uid, caps, caps, True):
        raise StepFailed(f"{svc.name} runs as uid {got['uid']} with CapEff {got['cap_eff']}, CapBnd "
                         f"{got['cap_bnd']}, NoNewPrivs {got['no_new_privs']}; its unit says uid {want_uid}, {caps}")
    lowered = svc.lowered_limits()
    return {**got, **({"limits_lowered": lowered} if lowered else {})}


def alive(r: Run, *names: str):
    """A check for wait_for: raises StepFailed with the log's end once one of the services exited."""
    def check():
        for n in names or list(r.services):
            s = r.services[n]
            if not s.running():
                raise StepFailed(f"{n} exited with {s.exit_code()}; its log ends:\n{s.log_tail()}")
    return check


# ---------------------------------------------------------------- readiness
def switch_ready(r: Run) -> bool:
    rep = r.stubs.rules(3, timeout=2.0)
    return rep.switch_connected and len(rep.flows) == (1 << r.cfg.switch.partition_bits)


def node_ready(r: Run, name: str) -> bool:
    r.stubs.stats(name, timeout=1.0)
    return True


def proxy_ready(r: Run, machine: str) -> bool:
    from exo_topo.netns import in_named_netns
    with in_named_netns(r.lab.netns(machine)):
        s = socket.create_connection(("127.0.0.1", 11211), timeout=1.0)
    s.close()
    return True


def wait_service(r: Run, name: str) -> None:
    """Until the (re)started service `name` does its job again."""
    svc = r.services[name]
    is_alive = alive(r, name)
    if name == "exo-controller.service":
        wait_for(lambda: switch_ready(r), "the switch to reconnect to the controller", alive=is_alive)
    elif name == "exo-proxy.service":
        wait_for(lambda: proxy_ready(r, svc.netns.removeprefix(PREFIX + "-")), "exo-proxy", alive=is_alive)
    else:
        node = name.split("@", 1)[1].split(".", 1)[0]
        wait_for(lambda: node_ready(r, node), f"{node} to answer Stats", alive=is_alive)


# ---------------------------------------------------------------- steps 6-9
def step_controller(r: Run) -> dict:
    from exo_topo.grpc_clients import Stubs
    r.stubs = Stubs(r.cfg)
    svc = start_unit(r, "exo-controller.service", "", CONTROLLER_HOST)
    took = wait_for(lambda: switch_ready(r), "the switch to connect and get Rulesets 1 and 3",
                    alive=alive(r, svc.name))
    return {"ready_s": round(took, 1), "argv": svc.launch.argv, "runs_as": check_identity(svc)}


def start_nodes(r: Run, unit_file: str, nodes) -> dict:
    out, runs_as = {}, {}
    for n in nodes:
        start_unit(r, unit_file, n.name, n.name)
    for n in nodes:
        svc = unit_file.replace("@.", f"@{n.name}.")
        out[n.name] = round(wait_for(lambda: node_ready(r, n.name), f"{n.name} to answer Stats",
                                     alive=alive(r, svc)), 1)
        runs_as[n.name] = check_identity(r.services[svc])
    return {"ready_s": out, "runs_as": runs_as}


def step_db_nodes(r: Run) -> dict:
    return start_nodes(r, "exo-db-node@.service", r.cfg.db_nodes)


def step_cache_nodes(r: Run) -> dict:
    return start_nodes(r, "exo-cache-node@.service", r.cfg.cache_nodes)


def step_proxies(r: Run) -> dict:
    out, runs_as = {}, {}
    for p in r.cfg.proxies:
        svc = start_unit(r, "exo-proxy.service", "", p.client)
        out[p.name] = round(wait_for(lambda: proxy_ready(r, p.client), "exo-proxy on 127.0.0.1:11211",
                                     alive=alive(r, svc.name)), 1)
        runs_as[p.name] = check_identity(svc)
    return {"ready_s": out, "runs_as": runs_as}
