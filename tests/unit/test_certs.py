"""`exo certs init` (topo/exo_cli/certs.py over exo_common/pki.py): every certificate verifies
against the CA (openssl verify, and a real TLS handshake between two of them), carries its
component's name, role and both EKUs; keys are 0600; a second run keeps everything; --force
reissues the leaves and keeps the CA; a leaf that is not right any more is reissued; a broken
config or a CA without its key is refused with a message that names the field or file."""
import datetime
import shutil
import socket
import ssl
import subprocess
import threading

import pytest
import yaml
from conftest_ci import missing_or_fail
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from exo_cli import main as cli
from exo_common import pki
from exo_common.config import parse_config


@pytest.fixture
def config_file(cluster_dict, tmp_path):
    cluster_dict["db_nodes"][2].update(emulator="emu0")  # an emulator gets its own certificate
    cluster_dict["clients"].append({"name": "client2", "mac": "02:00:00:00:03:02", "ip": "10.0.3.2",
                                    "switch_port": 32})
    cluster_dict["proxies"] = [{"name": "web0", "client": "client1"}]
    cluster_dict["security"] = {"cert_dir": str(tmp_path / "pki"), "operators": ["operator", "ops2"]}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(cluster_dict))
    return path


def init(config_file, *extra):
    return cli.main(["certs", "init", "--config", str(config_file), *extra])


def load(d, name):
    return x509.load_pem_x509_certificate((d / f"{name}.crt").read_bytes())


def contents(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}  # etcd/: test_etcd_tls.py


def test_every_component_gets_a_certificate_the_ca_signed(config_file, tmp_path, capsys):
    assert init(config_file) == 0
    d = tmp_path / "pki"
    cfg = parse_config(yaml.safe_load(config_file.read_text()))
    roles = cfg.roles()
    assert roles["emu0"] == "db" and roles["web0"] == "proxy" and roles["ops2"] == "operator"
    assert roles["switch"] == "switch" and roles["controller"] == "controller"
    assert "client1" not in roles  # clients speak only the data plane: no certificate
    assert sorted(p.name for p in d.iterdir()) == sorted(
        ["ca.crt", "ca.key", "etcd"] + [f"{n}.{ext}" for n in roles for ext in ("crt", "key")])
    for name in ["ca", *roles]:
        assert (d / f"{name}.key").stat().st_mode & 0o777 == 0o600
    ca = load(d, "ca")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for name, role in roles.items():
        c = load(d, name)
        assert pki.signed_by(c, ca)
        assert c.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == name
        assert c.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "exo:t"
        assert c.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value == role
        san = c.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert san.get_values_for_type(x509.DNSName) == [name]
        eku = list(c.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
        assert set(eku) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
        assert not c.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    out = capsys.readouterr().out
    assert f"{len(roles)} issued, 0 reissued, 0 kept" in out and "emu0" in out

    if shutil.which("openssl") is None:
        missing_or_fail("openssl is not installed (the independent check of the chain)")
    crts = [str(d / f"{n}.crt") for n in roles]
    r = subprocess.run(["openssl", "verify", "-CAfile", str(d / "ca.crt"), "-purpose", "sslclient", *crts],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(["openssl", "verify", "-CAfile", str(d / "ca.crt"), "-purpose", "sslserver", *crts],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    # The checker can fail: a certificate from another CA is rejected.
    other = pki.new_ca("other")[1]
    (tmp_path / "other.crt").write_bytes(other.public_bytes(pki.serialization.Encoding.PEM))
    r = subprocess.run(["openssl", "verify", "-CAfile", str(tmp_path / "other.crt"), crts[0]],
                       capture_output=True, text=True)
    assert r.returncode != 0


def test_two_components_complete_a_mutual_tls_handshake(config_file, tmp_path):
    assert init(config_file) == 0
    d = tmp_path / "pki"
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(d / "controller.crt", d / "controller.key")
    server.load_verify_locations(d / "ca.crt")
    server.verify_mode = ssl.CERT_REQUIRED
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_cert_chain(d / "cache1.crt", d / "cache1.key")
    client.load_verify_locations(d / "ca.crt")  # check_hostname: the server must be "controller"
    a, b = socket.socketpair()
    seen = {}

    def serve():
        with server.wrap_socket(a, server_side=True) as s:
            seen["client"] = dict(x[0] for x in s.getpeercert()["subject"])["commonName"]
            s.sendall(b"ok")

    t = threading.Thread(target=serve)
    t.start()
    with client.wrap_socket(b, server_hostname="controller") as c:
        assert c.recv(2) == b"ok"
    t.join(5)
    assert seen["client"] == "cache1"
    with pytest.raises(ssl.SSLCertVerificationError):  # the wrong expected name is caught
        a, b = socket.socketpair()
        t = threading.Thread(target=lambda: _quiet_handshake(server, a))
        t.start()
        try:
            client.wrap_socket(b, server_hostname="cache2")
        finally:
            b.close()
            t.join(5)


def _quiet_handshake(ctx, sock):
    try:
        ctx.wrap_socket(sock, server_side=True).close()
    except (ssl.SSLError, OSError):
        sock.close()


def test_rerun_keeps_everything_and_force_reissues_the_leaves(config_file, tmp_path, capsys):
    d = tmp_path / "pki"
    assert init(config_file) == 0
    first = contents(d)
    assert init(config_file) == 0
    assert contents(d) == first
    assert "0 issued, 0 reissued, 11 kept" in capsys.readouterr().out
    (d / "cache2.crt").unlink()  # a lost certificate is issued again, nothing else changes
    assert init(config_file) == 0
    now = contents(d)
    assert now["cache2.crt"] != first["cache2.crt"] and now["cache2.key"] != first["cache2.key"]
    assert {k: v for k, v in now.items() if not k.startswith("cache2.")} == \
           {k: v for k, v in first.items() if not k.startswith("cache2.")}
    assert init(config_file, "--force") == 0
    forced = contents(d)
    assert forced["ca.crt"] == first["ca.crt"] and forced["ca.key"] == first["ca.key"]
    assert all(forced[k] != now[k] for k in forced if not k.startswith("ca."))
    assert "reissued (--force)" in capsys.readouterr().out


def test_a_leaf_that_is_not_right_any_more_is_reissued(config_file, tmp_path, capsys):
    d = tmp_path / "pki"
    assert init(config_file) == 0
    # db1's pair from another CA, cache1's certificate over cache2's key, operator renamed ...
    other_key, other_ca = pki.new_ca("t")
    k, c = pki.issue_leaf(other_key, other_ca, "db1", "db", "t")
    pki.write_pair(d, "db1", k, c)
    (d / "cache1.key").write_bytes((d / "cache2.key").read_bytes())
    ca_key, ca = pki.read_pair(d, "ca")
    k, c = pki.issue_leaf(ca_key, ca, "operator", "cache", "t")  # wrong role
    pki.write_pair(d, "operator", k, c)
    old = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=pki.LEAF_DAYS - 10)
    k, c = pki.issue_leaf(ca_key, ca, "db2", "db", "t", now=old)  # expires in 10 days
    pki.write_pair(d, "db2", k, c)
    before = contents(d)
    capsys.readouterr()
    assert init(config_file) == 0
    out = capsys.readouterr().out
    assert "db1" in out and "not signed by this ca.crt" in out
    assert "its .key does not match its .crt" in out
    assert "subject organizationalUnitName is 'cache', not 'operator'" in out
    assert "expires" in out
    assert "4 reissued" in out
    after = contents(d)
    for name in ("db1", "cache1", "operator", "db2"):
        assert after[f"{name}.crt"] != before[f"{name}.crt"]
        assert pki.leaf_problem(load(d, name), pki.read_pair(d, name)[0], ca, name,
                                parse_config(yaml.safe_load(config_file.read_text())).roles()[name], "t") is None
    assert after["cache2.key"] == before["cache2.key"]


def test_a_broken_config_names_the_field(config_file, tmp_path, capsys):
    d = yaml.safe_load(config_file.read_text())
    d["security"]["operators"] = ["Bad Name"]
    config_file.write_text(yaml.safe_dump(d))
    assert init(config_file) == 2
    err = capsys.readouterr().err
    assert "security.operators" in err and "Bad Name" in err
    d["security"]["operators"] = ["cache1"]  # a name used twice
    config_file.write_text(yaml.safe_dump(d))
    assert init(config_file) == 2
    assert "security.operators[0]" in capsys.readouterr().err
    assert not (tmp_path / "pki").exists()


def test_a_ca_certificate_without_its_key_is_refused(config_file, tmp_path, capsys):
    assert init(config_file) == 0
    (tmp_path / "pki" / "ca.key").unlink()
    assert init(config_file) == 2
    err = capsys.readouterr().err
    assert "ca.crt exists without" in err and "ca.key" in err
    (tmp_path / "pki" / "ca.key").write_bytes(pki._key_pem(pki.new_ca("t")[0]))  # someone else's key
    assert init(config_file) == 2
    assert "ca.key is not the key of ca.crt" in capsys.readouterr().err


def test_out_overrides_the_cert_dir(config_file, tmp_path):
    assert init(config_file, "--out", str(tmp_path / "elsewhere")) == 0
    assert (tmp_path / "elsewhere" / "switch.crt").exists() and not (tmp_path / "pki").exists()
