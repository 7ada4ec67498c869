"""The conformance harness calls a failed test "unsupported" only when its output names one of
exo-proxy's limits (experiments/exo_proxy/conformance.py LIMITS); each must be documented in
docs/proxy.md, and the classifier must reject output that names none (the known-bad input)."""
import re
from pathlib import Path

from exo_proxy.conformance import LIMITS, reason_of

DOC = (Path(__file__).resolve().parents[2] / "docs" / "proxy.md").read_text()


def test_every_limit_is_documented():
    limits_table = DOC.split("## Limits", 1)[1].split("\n## ", 1)[0]
    for pattern in LIMITS:
        assert re.search(pattern.replace(r"\w", "X").replace(r"\S+", "X"), limits_table) or \
            re.search(pattern, limits_table), f"docs/proxy.md Limits has no row for {pattern!r}"


def test_reasons_name_the_limit_or_say_unexplained():
    assert reason_of("MemcacheClientError: b'flush_all not supported'").startswith("unsupported: flush_all")
    assert reason_of("b'client flags not supported (flags must be 0)'").startswith("unsupported: client flags")
    assert reason_of("CLIENT_ERROR mg flag T not supported").startswith("unsupported: mg flag T")
    # a real conformance bug: nothing in the output names a limit
    assert reason_of("AssertionError: assert b'value2' == None").startswith("unexplained:")
    assert reason_of("").startswith("unexplained:")


def test_flushing_tests_are_found_by_their_source(tmp_path):
    from exo_proxy.conformance import flushing_tests
    mod = tmp_path / "t.py"
    mod.write_text("def test_a(c):\n    c.flush_all()\n    assert 1\n\ndef test_b(c):\n    c.get(b'k')\n\n"
                   "def helper(c):\n    c.flush_all()\n")
    assert flushing_tests(mod) == {"test_a"}


def test_memccapable_verdicts_are_read_with_the_servers_reply():
    import subprocess
    from exo_proxy.conformance import run_memccapable
    out = ("ascii version                           [pass]\n"
           "ascii flush                             [CLIENT_ERROR flush_all not supported\n]\n"
           "ascii delete                            [DELETED\n]\n"
           "ascii incr                              [FAIL]\n")
    calls = []

    def run(argv, timeout):
        calls.append(argv)
        if argv[0] == "sh":
            return subprocess.CompletedProcess(argv, 1, out, "")
        return subprocess.CompletedProcess(argv, 0, "CLIENT_ERROR incr not supported\r\n", "")
    s = run_memccapable(run, "127.0.0.1", 11211).as_dict()
    assert (s["passed"], s["failed"]) == (1, 3)
    reasons = {f["test"]: f["reason"] for f in s["failures"]}
    assert reasons["flush"].startswith("unsupported: flush_all")
    assert reasons["incr"].startswith("unsupported: incr")  # from the probe of the proxy
    assert reasons["delete"].startswith("unexplained")       # a real deviation is not excused
    assert s["unexplained"] == 1
