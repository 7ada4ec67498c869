"""etcd's own CA (exo_common.pki.init_etcd_pki, written by `exo certs init`) and an etcd run with
TLS and --client-cert-auth (exo_topo.etcd.EtcdServer): the controllers' certificate is let in;
known-bad: a certificate of the cluster CA, no certificate, and plaintext are refused, and a
client that does not trust etcd's CA refuses etcd."""
import shutil
import subprocess

import grpc
import pytest
from cryptography import x509

from conftest_ci import missing_or_fail
from etcd import rpc_pb2, rpc_pb2_grpc
from etcd_fixtures import need_etcd
from exo_common import pki
from exo_common.etcd import EtcdClient, EtcdError, EtcdTls


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    pki.init_pki({"controller": "controller", "db1": "db"}, "t", d)  # the cluster CA, for the known-bad
    pki.init_etcd_pki("t", d)
    return d


@pytest.fixture(scope="module")
def etcd_tls(certs, tmp_path_factory):
    need_etcd()
    from exo_topo.etcd import EtcdServer
    with EtcdServer(tmp_path_factory.mktemp("etcd-tls"), tls=EtcdServer.server_tls(certs)) as server:
        yield server


def test_etcd_ca_is_separate_and_its_certificates_verify(certs, capsys):
    e = certs / "etcd"
    assert sorted(p.name for p in e.iterdir()) == ["ca.crt", "ca.key", "controller.crt", "controller.key",
                                                   "server.crt", "server.key"]
    for stem in ("ca", "controller", "server"):
        assert (e / f"{stem}.key").stat().st_mode & 0o777 == 0o600
    ca = x509.load_pem_x509_certificate((e / "ca.crt").read_bytes())
    cluster_ca = x509.load_pem_x509_certificate((certs / "ca.crt").read_bytes())
    assert ca.subject != cluster_ca.subject and "etcd CA" in ca.subject.rfc4514_string()
    server = x509.load_pem_x509_certificate((e / "server.crt").read_bytes())
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["etcd", "localhost"]
    assert [str(i) for i in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert pki.signed_by(server, ca) and not pki.signed_by(server, cluster_ca)
    # Run again: everything kept; a server certificate without the IP is reissued.
    before = {p.name: p.read_bytes() for p in e.iterdir()}
    report = pki.init_etcd_pki("t", certs)
    assert report.ca == "kept" and report.kept == ["server", "controller"]
    assert {p.name: p.read_bytes() for p in e.iterdir()} == before
    ca_key, ca_cert = pki.read_pair(e, "ca")
    k, c = pki.issue_leaf(ca_key, ca_cert, "etcd", "etcd", "t", hosts=("localhost",))
    pki.write_pair(e, "server", k, c)
    report = pki.init_etcd_pki("t", certs)
    assert report.reissued == {"server": "subjectAltName IP is [], not ['127.0.0.1']"}
    if shutil.which("openssl") is None:
        missing_or_fail("openssl is not installed (the independent check of the chain)")
    r = subprocess.run(["openssl", "verify", "-CAfile", str(e / "ca.crt"), str(e / "server.crt"),
                        str(e / "controller.crt")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(["openssl", "verify", "-CAfile", str(certs / "ca.crt"), str(e / "controller.crt")],
                       capture_output=True, text=True)
    assert r.returncode != 0  # known-bad: the cluster CA does not vouch for etcd's certificates


def test_the_controllers_certificate_is_let_in(etcd_tls, certs):
    assert etcd_tls.endpoints[0].startswith("https://127.0.0.1:")
    with EtcdClient(etcd_tls.endpoints, tls=EtcdTls.client(certs)) as c:
        c.put("/exo/t/tls", b"ok")
        assert c.get("/exo/t/tls").value == b"ok"


def refused(client: EtcdClient, etcd_tls, certs) -> str:
    """The refusal's message, after checking that etcd answers the controllers' certificate at
    the same time (so the refusal is the certificate's, not a dead etcd's)."""
    with pytest.raises(EtcdError) as err:
        client.get("/exo/t/tls")
    client.close()
    with EtcdClient(etcd_tls.endpoints, tls=EtcdTls.client(certs)) as good:
        assert good.get("/exo/t/tls") is not None
    return str(err.value)


def test_a_cluster_ca_certificate_is_refused(etcd_tls, certs):
    # db1's certificate and the cluster CA: valid in the cluster, not for etcd
    tls = EtcdTls(str(certs / "etcd" / "ca.crt"), str(certs / "db1.crt"), str(certs / "db1.key"))
    msg = refused(EtcdClient(etcd_tls.endpoints, tls=tls, timeout_s=2.0), etcd_tls, certs)
    assert "UNAVAILABLE" in msg


def test_no_certificate_and_plaintext_are_refused(etcd_tls, certs):
    target = etcd_tls.endpoints[0].removeprefix("https://")
    ca = (certs / "etcd" / "ca.crt").read_bytes()
    creds = grpc.ssl_channel_credentials(root_certificates=ca)  # trusts etcd, presents nothing
    with grpc.secure_channel(target, creds, options=[("grpc.ssl_target_name_override", "etcd")]) as ch:
        with pytest.raises(grpc.RpcError) as err:
            rpc_pb2_grpc.KVStub(ch).Range(rpc_pb2.RangeRequest(key=b"/exo/t/tls"), timeout=2)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    msg = refused(EtcdClient([target], timeout_s=2.0), etcd_tls, certs)
    assert "UNAVAILABLE" in msg


def test_a_client_that_does_not_trust_etcds_ca_refuses_etcd(etcd_tls, certs):
    tls = EtcdTls(str(certs / "ca.crt"), str(certs / "etcd" / "controller.crt"), str(certs / "etcd" / "controller.key"))
    msg = refused(EtcdClient(etcd_tls.endpoints, tls=tls, timeout_s=2.0), etcd_tls, certs)
    assert "UNAVAILABLE" in msg


def test_a_missing_certificate_file_is_named(tmp_path):
    with pytest.raises(EtcdError, match=r"etcd TLS ca file .*/etcd/ca.crt is missing: run `exo certs init"):
        EtcdClient(["https://127.0.0.1:2379"], tls=EtcdTls.client(tmp_path))


def test_etcd_is_a_reserved_name(cluster_dict):
    from exo_common.config import ConfigError, parse_config
    cluster_dict["cache_nodes"][0]["name"] = "etcd"  # known-bad: it would share etcd's certificate name
    with pytest.raises(ConfigError, match=r"cache_nodes\[0\].name: 'etcd' already names reserved"):
        parse_config(cluster_dict)
