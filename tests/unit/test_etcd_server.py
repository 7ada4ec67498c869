"""exo_topo.etcd.EtcdServer: the command line it runs, and that the etcd it starts is gone after
the `with`, after an exception inside it, and when etcd cannot start (known-bad: a data dir that
is a file)."""
import os
from pathlib import Path

import pytest

from etcd_fixtures import need_etcd
from exo_common.etcd import EtcdClient, EtcdError, EtcdTls
from exo_topo.etcd import EtcdServer, EtcdServerError, etcd_command


def test_the_command_line_has_the_test_timing_and_tls_only_when_given():
    plain = etcd_command("etcd", "m", Path("/r/etcd"), 1001, 1002, None)
    assert plain[plain.index("--heartbeat-interval") + 1] == "10"
    assert plain[plain.index("--election-timeout") + 1] == "100"
    assert plain[plain.index("--data-dir") + 1] == "/r/etcd"
    assert plain[plain.index("--listen-client-urls") + 1] == "http://127.0.0.1:1001"
    assert "--client-cert-auth" not in plain
    tls = etcd_command("etcd", "m", Path("/r/etcd"), 1001, 1002, EtcdTls("/p/ca.crt", "/p/s.crt", "/p/s.key"))
    assert tls[tls.index("--listen-client-urls") + 1] == "https://127.0.0.1:1001"
    assert "--client-cert-auth" in tls and "--peer-client-cert-auth" in tls
    assert tls[tls.index("--trusted-ca-file") + 1] == "/p/ca.crt"


def gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
        return False
    except ProcessLookupError:
        return True


def test_etcd_is_torn_down_after_the_with_and_after_an_exception(tmp_path):
    need_etcd()
    with EtcdServer(tmp_path / "a") as s:
        pid = s.proc.pid
        with EtcdClient(s.endpoints) as c:
            c.put("/k", b"v")
    assert gone(pid)
    assert (tmp_path / "a" / "etcd" / "member").is_dir()  # --data-dir <run_dir>/etcd
    with pytest.raises(RuntimeError, match="boom"):
        with EtcdServer(tmp_path / "b") as s:
            pid = s.proc.pid
            raise RuntimeError("boom")
    assert gone(pid)


def test_an_etcd_that_cannot_start_is_an_error_with_its_log(tmp_path):
    need_etcd()
    (tmp_path / "etcd").write_text("not a directory")
    s = EtcdServer(tmp_path, ready_timeout_s=5)
    with pytest.raises(EtcdServerError, match="etcd exited with"):
        with s:
            pass
    assert s.proc is None


def test_missing_tls_files_are_named_before_etcd_starts(tmp_path):
    need_etcd()
    with pytest.raises(EtcdError, match=r"etcd TLS ca file .*/etcd/ca.crt is missing"):
        with EtcdServer(tmp_path, tls=EtcdServer.server_tls(tmp_path)):
            pass
