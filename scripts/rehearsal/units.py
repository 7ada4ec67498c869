"""systemd unit files as the rehearsal runs them: parse, expand, and turn into one command line.

There is no systemd here (and the rehearsal must not need one), so a unit is run the way systemd
would run it, from what the unit file says and nothing else:

    ExecStart=            the argv, after %-specifiers (%i %n %t %%) and $VAR / ${VAR} from
                          Environment= and EnvironmentFile= (systemd's rules: ${VAR} stays one word,
                          $VAR splits on whitespace)
    User= Group=          setpriv --reuid/--regid --init-groups
    AmbientCapabilities=  setpriv --inh-caps/--ambient-caps (ambient needs inheritable)
    CapabilityBoundingSet= setpriv --bounding-set (empty = none)
    NoNewPrivileges=yes   setpriv --no-new-privs
    UMask=                the child's umask
    LimitNOFILE= LimitMEMLOCK=   prlimit --nofile / --memlock (at most the caller's hard limit:
                          raising it needs CAP_SYS_RESOURCE, which this sandbox lacks; the lowered
                          ones are reported)
    RuntimeDirectory=, StateDirectory=   created (owned by User=) before the start

Everything is relative to a root directory that stands in for "/" (the scratch root the .deb was
unpacked into): absolute paths under /usr, /etc, /run and /var in the command line, in
Environment= values and in EnvironmentFile= are mapped into it. The hardening settings that need
systemd's own namespaces (ProtectSystem=, PrivateTmp=, ...) are not emulated; they are checked
with `systemd-analyze verify` instead. Pure: no I/O except reading the files it is given.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

MAPPED_PREFIXES = ("/usr/", "/etc/", "/run/", "/var/")
# What a unit may say that changes how its process runs; any other [Service] key that is not a
# hardening setting is refused, so a new one cannot be silently ignored by the rehearsal.
RUN_KEYS = {"Type", "User", "Group", "ExecStart", "Environment", "EnvironmentFile", "Restart", "RestartSec",
            "RuntimeDirectory", "StateDirectory", "StateDirectoryMode", "UMask", "AmbientCapabilities",
            "CapabilityBoundingSet", "NoNewPrivileges", "LimitNOFILE", "LimitMEMLOCK"}
# Enforced by systemd's namespaces and seccomp: verified by systemd-analyze, not emulated here.
HARDENING_KEYS = {"ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "ReadWritePaths",
                  "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups",
                  "ProtectClock", "ProtectHostname", "RestrictNamespaces", "RestrictRealtime", "RestrictSUIDSGID",
                  "LockPersonality", "SystemCallArchitectures", "RestrictAddressFamilies", "DevicePolicy",
                  "DeviceAllow"}


class UnitError(ValueError):
    """A unit file the rehearsal cannot run as written; the message names the file and key."""


@dataclass
class Unit:
    path: Path
    sections: dict[str, list[tuple[str, str]]]  # section -> [(key, value)] in file order

    def values(self, key: str, section: str = "Service") -> list[str]:
        return [v for k, v in self.sections.get(section, []) if k == key]

    def value(self, key: str, default: str = "", section: str = "Service") -> str:
        vals = self.values(key, section)
        return vals[-1] if vals else default


@dataclass
class Launch:
    """Everything needed to start one unit instance, with paths already mapped into the root."""
    unit: str                      # e.g. exo-db-node@db0.service
    argv: list[str]
    env: dict[str, str]
    user: str
    group: str
    ambient_caps: list[str]        # e.g. ["net_raw"]
    bounding_caps: list[str]
    no_new_privs: bool
    umask: int
    make_dirs: list[Path] = field(default_factory=list)  # RuntimeDirectory/StateDirectory, owned by user
    limits: dict[str, int] = field(default_factory=dict)  # prlimit resource -> value (-1: unlimited)

    def prlimit_options(self, hard: dict[str, int] | None = None) -> tuple[list[str], dict[str, str]]:
        """prlimit options for the unit's limits, each at most `hard[resource]` (the caller's hard
        limit, -1 = unlimited: a process without CAP_SYS_RESOURCE cannot raise it, as systemd,
        which has it, could). Returns (options, {resource: why it was lowered})."""
        opts, lowered = [], {}
        for res, want in self.limits.items():
            cap = (hard or {}).get(res, -1)
            value = want
            if cap != -1 and (want == -1 or want > cap):
                value = cap
                lowered[res] = f"{'unlimited' if want == -1 else want} asked, {cap} is this machine's hard limit"
            opts.append(f"--{res}={'unlimited' if value == -1 else value}")
        return opts, lowered

    def setpriv_argv(self, hard: dict[str, int] | None = None) -> list[str]:
        """The command line that runs argv as systemd would: limits, user, groups, capabilities."""
        def caps(names: list[str]) -> str:
            return ",".join(["-all", *(f"+{c}" for c in names)])
        out = ["setpriv", f"--reuid={self.user}", f"--regid={self.group}", "--init-groups",
               f"--inh-caps={caps(self.ambient_caps)}", f"--ambient-caps={caps(self.ambient_caps)}",
               f"--bounding-set={caps(self.bounding_caps)}"]
        if self.no_new_privs:
            out.append("--no-new-privs")
        opts, _ = self.prlimit_options(hard)
        limits = ["prlimit", *opts, "--"] if opts else []
        return [*limits, *out, "--", *self.argv]


def parse(path: Path) -> Unit:
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            sections.setdefault(current, [])
            continue
        if current is None or "=" not in line:
            raise UnitError(f"{path}:{n}: not a 'Key=value' line inside a [Section]: {raw!r}")
        key, value = line.split("=", 1)
        sections[current].append((key.strip(), value.strip()))
    unit = Unit(path, sections)
    unknown = sorted({k for k, _ in sections.get("Service", [])} - RUN_KEYS - HARDENING_KEYS)
    if unknown:
        raise UnitError(f"{path}: [Service] {', '.join(unknown)}: the rehearsal does not know how to run "
                        f"this setting (scripts/rehearsal/units.py)")
    if len(unit.values("ExecStart")) != 1:
        raise UnitError(f"{path}: ExecStart: want exactly one, found {len(unit.values('ExecStart'))}")
    return unit


def map_path(value: str, root: Path) -> str:
    """/usr/..., /etc/..., /run/..., /var/... -> the same under root; anything else unchanged."""
    return str(root) + value if value.startswith(MAPPED_PREFIXES) else value


def expand_specifiers(text: str, unit_name: str, instance: str, root: Path) -> str:
    """systemd's %i (instance), %n (full unit name), %t (runtime dir: /run) and %%."""
    table = {"i": instance, "n": unit_name, "t": map_path("/run/", root).rstrip("/"), "%": "%"}

    def one(m: re.Match) -> str:
        if m.group(1) not in table:
            raise UnitError(f"{unit_name}: specifier %{m.group(1)} is not supported by the rehearsal")
        return table[m.group(1)]
    return re.sub(r"%(.)", one, text)


def parse_env_file(text: str) -> dict[str, str]:
    """KEY=value lines (comments and blank lines skipped; one level of quotes removed)."""
    env = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if "=" not in line:
            raise UnitError(f"environment file line {raw!r}: want KEY=value")
        k, v = line.split("=", 1)
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        env[k.strip()] = v
    return env


def expand_env(argv_words: list[str], env: dict[str, str], unit_name: str) -> list[str]:
    """${VAR} -> its value as (part of) one word; a word that is exactly $VAR -> its value split on
    whitespace. An unset variable is an error here (systemd would pass an empty string, which for
    these units always means a missing EnvironmentFile entry)."""
    def lookup(name: str) -> str:
        if name not in env:
            raise UnitError(f"{unit_name}: ExecStart uses ${name}, which no Environment= or EnvironmentFile= sets")
        return env[name]
    out: list[str] = []
    for word in argv_words:
        m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if m:
            out.extend(lookup(m.group(1)).split())
            continue
        out.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda mm: lookup(mm.group(1)), word))
    return out


def caps_of(value: str) -> list[str]:
    """"CAP_NET_RAW CAP_NET_ADMIN" -> ["net_raw", "net_admin"] (setpriv's spelling)."""
    out = []
    for word in value.split():
        if not re.fullmatch(r"CAP_[A-Z_]+", word):
            raise UnitError(f"capability {word!r}: want names like CAP_NET_RAW")
        out.append(word[4:].lower())
    return out


def launch(unit: Unit, instance: str, root: Path, env_files: dict[str, str] | None = None) -> Launch:
    """The Launch of `unit` (instance "" for a plain unit). env_files: EnvironmentFile path (as the
    unit names it) -> its text, read by the caller from under root."""
    if str(root).startswith(MAPPED_PREFIXES):
        raise UnitError(f"root {root}: must not itself lie under {', '.join(MAPPED_PREFIXES)} (paths would map twice)")
    base = unit.path.name
    unit_name = base.replace("@.", f"@{instance}.") if "@." in base else base
    if ("@." in base) != bool(instance):
        raise UnitError(f"{base}: {'a template needs an instance' if '@.' in base else 'not a template'}")

    def spec(text: str) -> str:
        return expand_specifiers(text, unit_name, instance, root)

    env: dict[str, str] = {}
    for item in unit.values("Environment"):
        for word in shlex.split(spec(item)):
            k, _, v = word.partition("=")
            env[k] = map_path(v, root)
    for item in unit.values("EnvironmentFile"):
        name = spec(item)
        optional = name.startswith("-")
        name = name.lstrip("-")
        text = (env_files or {}).get(name)
        if text is None:
            if optional:
                continue
            raise UnitError(f"{unit_name}: EnvironmentFile={name} is missing (write it before starting the unit)")
        env.update(parse_env_file(text))
    words = expand_env(shlex.split(spec(unit.value("ExecStart"))), env, unit_name)
    argv = [map_path(w, root) for w in words]
    dirs = [Path(map_path(f"/run/{spec(d)}", root)) for v in unit.values("RuntimeDirectory") for d in v.split()]
    dirs += [Path(map_path(f"/var/lib/{spec(d)}", root)) for v in unit.values("StateDirectory") for d in v.split()]
    umask = unit.value("UMask", "0022")
    if not re.fullmatch(r"0?[0-7]{3}", umask):
        raise UnitError(f"{unit_name}: UMask={umask}: want an octal mode such as 0077")
    user = unit.value("User", "root")
    limits = dict(limit_of(key, unit.value(key), unit_name)
                  for key in ("LimitNOFILE", "LimitMEMLOCK") if unit.value(key))
    return Launch(unit=unit_name, argv=argv, env=env, user=user, group=unit.value("Group", user),
                  ambient_caps=caps_of(unit.value("AmbientCapabilities")),
                  bounding_caps=caps_of(unit.value("CapabilityBoundingSet")),
                  no_new_privs=unit.value("NoNewPrivileges", "no") in ("yes", "true", "1", "on"),
                  umask=int(umask, 8), make_dirs=dirs, limits=limits)


def limit_of(key: str, value: str, unit_name: str) -> tuple[str, int]:
    """LimitNOFILE=65536 -> ("nofile", 65536); infinity -> -1 (prlimit's names)."""
    if value != "infinity" and not value.isdigit():
        raise UnitError(f"{unit_name}: {key}={value}: want a number or infinity")
    return {"LimitNOFILE": "nofile", "LimitMEMLOCK": "memlock"}[key], -1 if value == "infinity" else int(value)
