"""exo_harness.client_bench's fields and arithmetic, against tests/unit/loopback_node.py (a
Python responder: the figures here say nothing about speed; the bench measures that against a
real cache node)."""
import json
import os

from conftest_ci import missing_or_fail
from exoskeleton import native, wire
from exo_harness import client_bench


def test_client_bench_fields(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        missing_or_fail("raw sockets on lo need root")
    if native.load()[0] is None:
        missing_or_fail(native.load()[1])
    from loopback_node import LoopbackNode
    made = []
    real_client = client_bench.Client

    def client_with_node(*a, **kw):   # every client the bench opens gets a node answering it
        c = real_client(*a, **kw)
        made.append(LoopbackNode(lambda m, _: [wire.Message(m.opcode | wire.OP_REPLY, wire.ST_OK, 0, m.client_id,
                                                            m.seq, m.key, b"v" * 512)], c.io.port))
        return c

    monkeypatch.setattr(client_bench, "Client", client_with_node)
    keys = tmp_path / "keys.hex"
    keys.write_text("\n".join((b"k%015d" % i).hex() for i in range(100)))
    try:
        assert client_bench.main(["--iface", "lo", "--keys-file", str(keys), "--seconds", "0.2", "--chunk", "64",
                                  "--window", "16", "--timeout", "0.1", "--out", str(tmp_path / "c.json")]) == 0
    finally:
        for n in made:
            n.close()
    res = json.loads((tmp_path / "c.json").read_text())
    assert res["native"] is True
    for k in ("pipelined_gets_per_s", "sync_gets_per_s", "sync_gets_per_s_pure_python"):
        assert res[k] > 0
    assert res["pipelined"]["answered"] > 0 and res["pipelined"]["timeouts"] == 0
    assert res["pipelined_requests_per_send_call"] >= 1


def test_a_bad_keys_file_is_refused(tmp_path, capsys):
    bad = tmp_path / "keys.hex"
    bad.write_text("not-hex\n")
    assert client_bench.main(["--iface", "lo", "--keys-file", str(bad), "--out", str(tmp_path / "c.json")]) == 2
    assert "not one hex key per line" in capsys.readouterr().err
