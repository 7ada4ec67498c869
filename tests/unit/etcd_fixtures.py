"""A real etcd for the tests of exo_common.etcd (test_etcd_*.py): `etcd_plain` (plaintext, one per
module) and `etcd_tls` (etcd's own CA from pki.init_etcd_pki, --client-cert-auth). Without the
etcd binary: skipped on a developer's machine, failed under CI (conftest_ci.missing_or_fail)."""
import shutil

import pytest

from conftest_ci import missing_or_fail


def need_etcd() -> None:
    if shutil.which("etcd") is None:
        missing_or_fail("etcd is not installed (Debian etcd-server; scripts/install-deps.sh)")


@pytest.fixture(scope="module")
def etcd_plain(tmp_path_factory):
    need_etcd()
    from exo_topo.etcd import EtcdServer
    with EtcdServer(tmp_path_factory.mktemp("etcd-plain")) as server:
        yield server


@pytest.fixture
def client(etcd_plain):
    from exo_common.etcd import EtcdClient
    c = EtcdClient(etcd_plain.endpoints)
    yield c
    c.close()
