"""Steps 1-3 of docs/deploy.md on the scratch root: install the package (the .deb built by cpack,
unpacked with its own postinst run, the units checked by systemd-analyze), write the cluster
config with the installed `exo config`, and make the certificates with the installed `exo certs`.
"""
from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

from netlab import run
from run_state import SERVICE_USER, UNIT_FILES, Run, StepFailed

WANT_IN_DEB = ("./usr/bin/exo-cache-node", "./usr/bin/exo-db-node", "./usr/bin/exo-proxy", "./usr/bin/exo-controller",
               "./usr/bin/exo", *(f"./usr/lib/systemd/system/{u}" for u in UNIT_FILES))


# ---------------------------------------------------------------- step 1
def step_install(r: Run) -> dict:
    r.deb = r.args.deb or build_deb(r)
    r.deb_files = [line.split()[-1] for line in run("dpkg", "-c", str(r.deb)).stdout.splitlines()]
    missing = [f for f in WANT_IN_DEB if f not in r.deb_files]
    if missing:
        raise StepFailed(f"{r.deb} lacks {missing}")
    r.root.mkdir(parents=True, exist_ok=True)
    os.chmod(r.root, 0o755)
    run("dpkg", "-x", str(r.deb), str(r.root), timeout=120)
    run_postinst(r)
    verify_units(r)
    return {"deb": str(r.deb), "bytes": r.deb.stat().st_size, "files": len(r.deb_files),
            "systemd_analyze_verify": "clean"}


def build_deb(r: Run) -> Path:
    out = r.work / "deb"
    out.mkdir(parents=True, exist_ok=True)
    build = Path(r.args.build)
    if not (build / "CPackConfig.cmake").exists():
        raise StepFailed(f"{build}/CPackConfig.cmake is missing: run `make build` first")
    run("cpack", "--config", str(build / "CPackConfig.cmake"), "-B", str(out), timeout=600)
    debs = sorted(out.glob("exoskeleton_*.deb"))
    if not debs:
        raise StepFailed(f"cpack wrote no exoskeleton_*.deb into {out}")
    return debs[-1]


def run_postinst(r: Run) -> None:
    """The package's own postinst (from the .deb), with /etc/exo mapped into the scratch root:
    it creates the exo user (on this machine: setpriv needs it) and /etc/exo{,/pki}."""
    ctrl = r.work / "deb-control"
    run("dpkg-deb", "-e", str(r.deb), str(ctrl))
    script = (ctrl / "postinst").read_text().replace("/etc/exo", f"{r.root}/etc/exo")
    user_existed = _user_exists(SERVICE_USER)
    res = subprocess.run(["sh", "-s", "configure"], input=script, capture_output=True, text=True, timeout=60)
    if not user_existed and _user_exists(SERVICE_USER):
        r.lab.on_teardown(f"user {SERVICE_USER}", _remove_service_user)
    if res.returncode != 0:
        raise StepFailed(f"postinst configure: exit {res.returncode}: {res.stderr.strip()}")


def verify_units(r: Run) -> None:
    """systemd-analyze verify on the installed units. It checks that ExecStart's program exists,
    so it reads copies whose /usr/bin paths point into the scratch root (nothing else changed)."""
    copies = r.work / "verify"
    copies.mkdir(parents=True, exist_ok=True)
    for u in UNIT_FILES:
        text = (r.root / "usr/lib/systemd/system" / u).read_text()
        (copies / u).write_text(text.replace("=/usr/bin/", f"={r.root}/usr/bin/"))
    verify = run("systemd-analyze", "verify", *(str(copies / u) for u in UNIT_FILES), check=False)
    if verify.returncode != 0 or verify.stderr.strip():
        raise StepFailed(f"systemd-analyze verify: {verify.stderr.strip() or verify.returncode}")


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _remove_service_user() -> None:
    """Undo what the postinst did on this machine (a real install keeps the user)."""
    run("deluser", "--system", "--quiet", SERVICE_USER, check=False)
    run("delgroup", "--system", "--quiet", SERVICE_USER, check=False)


# ---------------------------------------------------------------- step 2
def step_config(r: Run) -> dict:
    if len(r.cfg.proxies) != 1:
        # The machines share one scratch root, hence one /etc/exo/exo-proxy.env and one exo-proxy.service.
        raise StepFailed(f"proxies: the rehearsal runs exactly one exo-proxy, the config has {len(r.cfg.proxies)}")
    etc = r.root / "etc/exo"
    yaml_path = r.rendered_config(write_to=etc / "cluster.yaml")
    exo = r.installed("/usr/bin/exo")
    check = run(exo, "config", "check", str(yaml_path))
    run(exo, "config", "resolve", str(yaml_path), "-o", str(etc / "cluster.json"))
    proxy_env = etc / "exo-proxy.env"
    proxy_env.write_text(f"EXO_PROXY_CLIENT={r.cfg.proxies[0].client}\n")
    for f in (yaml_path, etc / "cluster.json", proxy_env):
        os.chmod(f, 0o644)
    return {"check": check.stdout.strip()}


# ---------------------------------------------------------------- step 3
def step_certs(r: Run) -> dict:
    if r.cfg.security.insecure_dev_mode:
        raise StepFailed("security.insecure_dev_mode is true: the rehearsal runs with TLS")
    out = run(r.installed("/usr/bin/exo"), "certs", "init", "--config", str(r.root / "etc/exo/cluster.yaml"))
    pki = Path(r.cfg.security.cert_dir)
    pw = pwd.getpwnam(SERVICE_USER)
    owned = []
    for name, role in r.cfg.roles().items():
        if role in ("controller", "cache", "db", "proxy"):
            os.chown(pki / f"{name}.key", pw.pw_uid, pw.pw_gid)
            owned.append(name)
    lines = out.stdout.strip().splitlines()
    return {"issued": lines[-1] if lines else "", "keys_for_service_user": owned}
