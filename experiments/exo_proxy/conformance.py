"""exo-proxy against memcached test suites we did not write (docs/proxy.md, "Conformance"):
pymemcache's own integration tests (from its sdist), libmemcached's `memccapable -a`, and a PHP
client (Debian's php-memcached) doing set/get/delete. Each suite runs inside the host where the
proxy listens and gives `passed`, `failed` and `failures` (test name and reason). A failure's
reason is the proxy's own error line when there is one: every limit it refuses names itself
(`LIMITS` below, the same phrases docs/proxy.md lists), so a failure that names none of them is
a conformance bug, not an unsupported feature.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parents[2]
PYMEMCACHE_VERSION = "4.0.0"
PYMEMCACHE_TESTS = REPO / ".cache" / f"pymemcache-{PYMEMCACHE_VERSION}" / "pymemcache" / "test" / "test_integration.py"

# What exo-proxy refuses, as its error lines name it (proxy/src/outcomes.cc, session.cc):
# regular expressions over a failure's output. docs/proxy.md has one row per limit
# (tests/unit/test_proxy_limits.py checks both).
LIMITS = (
    r"flush_all not supported",
    r"add/replace not supported",
    r"cas not supported",
    r"(append|prepend) not supported",
    r"(incr|decr) not supported",
    r"(touch|gats?) not supported",
    r"client flags not supported",
    r"expiry not supported",
    r"object too large for cache",
    r"m[gsd] flag \w not supported",
    r"ms mode \w not supported",
    r"(ma|me) not supported",
    r"stats \S+ not supported",
)

# Run inside the proxy's host: (argv, timeout) -> CompletedProcess
Runner = Callable[[list[str], float], subprocess.CompletedProcess]


@dataclass
class Suite:
    name: str
    passed: int = 0
    failed: int = 0
    failures: list[dict] = field(default_factory=list)
    command: str = ""
    error: Optional[str] = None  # the suite could not run at all
    output_tail: str = ""        # the end of what the tool printed

    def fail(self, test: str, detail: str, reason: Optional[str] = None) -> None:
        self.failed += 1
        self.failures.append({"test": test, "reason": reason or reason_of(detail), "detail": detail[-400:]})

    def as_dict(self) -> dict:
        return {"passed": self.passed, "failed": self.failed, "failures": self.failures,
                "command": self.command, "error": self.error, "output_tail": self.output_tail,
                "unexplained": sum(1 for f in self.failures if f["reason"].startswith("unexplained"))}


def reason_of(detail: str) -> str:
    """The documented limit a failure's output names, else "unexplained: ..."."""
    for pattern in LIMITS:
        m = re.search(pattern, detail)
        if m:
            return f"unsupported: {m.group(0)} (docs/proxy.md)"
    last = detail.strip().splitlines()[-1] if detail.strip() else ""
    return f"unexplained: {last[:200]}"


def run_memccapable(run: Runner, host: str, port: int) -> Suite:
    """libmemcached's conformance tester, ASCII protocol only (exo-proxy speaks no binary)."""
    # Test names go to stdout and verdicts to stderr: unbuffered and merged, each test's line
    # reads "ascii <test> [pass|FAIL]" as on a terminal.
    tool = f"memccapable -a -t 5 -h {host} -p {port}"
    s = Suite("memccapable", command=tool)
    res = run(["sh", "-c", f"stdbuf -o0 -e0 {tool} 2>&1"], 300)
    text = res.stdout + res.stderr
    # A verdict is [pass], [FAIL], or the server's unexpected reply in brackets (which may end
    # with its own newline): "ascii flush   [CLIENT_ERROR flush_all not supported\n]".
    for m in re.finditer(r"ascii ([a-z][a-z ]*?)\s+\[([^\]]*)\]", text):
        test, verdict = m.group(1), m.group(2).strip()
        if verdict == "pass":
            s.passed += 1
        elif verdict in ("fail", "FAIL"):
            # memccapable showed no reply: ask the proxy the command the test is named after
            # and keep what it answered (its error line names the limit).
            s.fail(test, probe(run, host, port, test))
        else:
            s.fail(test, f"{test}: the server answered {verdict!r}")
    if s.passed + s.failed == 0:
        s.error = f"no test results (exit {res.returncode}): {text[-400:]}"
    s.output_tail = text[-1500:]
    return s


# A memccapable test's first word -> one request of that command, to ask the proxy about it.
PROBES = {"flush": b"flush_all\r\n", "add": b"add exo-probe 0 0 1\r\nx\r\n",
          "replace": b"replace exo-probe 0 0 1\r\nx\r\n", "cas": b"cas exo-probe 0 0 1 1\r\nx\r\n",
          "incr": b"incr exo-probe 1\r\n", "decr": b"decr exo-probe 1\r\n",
          "append": b"append exo-probe 0 0 1\r\nx\r\n", "prepend": b"prepend exo-probe 0 0 1\r\nx\r\n"}
PROBE_CLIENT = ("import socket,sys; s=socket.create_connection((sys.argv[1],int(sys.argv[2])),5); "
                "s.sendall(bytes.fromhex(sys.argv[3])); print(s.recv(4096).decode(errors='replace'))")


def probe(run: Runner, host: str, port: int, test: str) -> str:
    """What the proxy answers to the command memccapable's test `test` exercises."""
    request = PROBES.get(test.split()[0])
    if request is None:
        return f"{test}: failed (memccapable shows no reply; run it with -v)"
    res = run([sys.executable, "-c", PROBE_CLIENT, host, str(port), request.hex()], 30)
    return f"{test}: the proxy answers {request.split(b' ')[0].decode().strip()!r} with {res.stdout.strip()!r}"


def run_pymemcache(run: Runner, host: str, port: int, junit: Path) -> Suite:
    """pymemcache's integration tests, as shipped in its sdist, against the proxy."""
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q",
            "-m", "integration", "--server", host, "--port", str(port), f"--junitxml={junit}",
            str(PYMEMCACHE_TESTS)]
    s = Suite("pymemcache", command=" ".join(argv))
    if not PYMEMCACHE_TESTS.exists():
        s.error = f"{PYMEMCACHE_TESTS} missing (scripts/install-deps.sh fetches pymemcache's sdist)"
        return s
    res = run(argv, 600)
    if not junit.exists():
        s.error = f"pytest wrote no report (exit {res.returncode}): {(res.stdout + res.stderr)[-400:]}"
        return s
    flushing = flushing_tests(PYMEMCACHE_TESTS)
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('name')}"
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if case.find("skipped") is not None:
            continue
        if bad is None:
            s.passed += 1
            continue
        detail = (bad.get("message") or "") + "\n" + (bad.text or "")
        reason = reason_of(detail)
        if reason.startswith("unexplained") and name.split("[")[0] in flushing and "AssertionError" in detail:
            reason = FLUSH_NOREPLY
        s.fail(name, detail, reason)
    return s


# pymemcache sends flush_all with noreply by default, so a test that starts by flushing never
# sees the proxy refuse it; its first assertion then meets what an earlier test stored.
FLUSH_NOREPLY = ("unsupported: flush_all not supported (docs/proxy.md): the test empties the store "
                 "with flush_all sent noreply, cannot see the refusal, and then finds a key an earlier "
                 "test stored")


def flushing_tests(path: Path) -> set[str]:
    """The test functions of a pymemcache test module that call flush_all."""
    tree = ast.parse(path.read_text())
    out = set()
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test"):
            if any(isinstance(n, ast.Attribute) and n.attr == "flush_all" for n in ast.walk(fn)):
                out.add(fn.name)
    return out


PHP_SCRIPT = r"""
$m = new Memcached();
$m->addServer($argv[1], (int)$argv[2]);
$m->setOption(Memcached::OPT_COMPRESSION, false);
$k = "php-conformance-" . getmypid();
$ok = [];
$ok["set"] = $m->set($k, "value-from-php") === true;
$ok["get"] = $m->get($k) === "value-from-php";
$ok["delete"] = $m->delete($k) === true;
$ok["get after delete"] = $m->get($k) === false && $m->getResultCode() === Memcached::RES_NOTFOUND;
foreach ($ok as $name => $pass) { echo ($pass ? "pass" : "fail") . " " . $name . " " . $m->getResultMessage() . "\n"; }
"""


def run_php(run: Runner, host: str, port: int) -> Suite:
    """Another language's client: PHP's Memcached extension (libmemcached), set/get/delete."""
    argv = ["php", "-r", PHP_SCRIPT, "--", host, str(port)]
    s = Suite("php-memcached", command=f"php -r <script in {__name__}> {host} {port}")
    res = run(argv, 60)
    for line in res.stdout.splitlines():
        verdict, _, rest = line.partition(" ")
        if verdict == "pass":
            s.passed += 1
        elif verdict == "fail":
            s.fail(rest, rest)
    if s.passed + s.failed == 0:
        s.error = f"no results (exit {res.returncode}): {(res.stdout + res.stderr)[-400:]}"
    return s


def run_all(run: Runner, host: str, port: int, work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    suites = [run_pymemcache(run, host, port, work / "pymemcache-junit.xml"),
              run_memccapable(run, host, port), run_php(run, host, port)]
    return {s.name: s.as_dict() for s in suites}
