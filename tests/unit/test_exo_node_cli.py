"""`exo node`: argument errors exit 2 with a message naming what is missing (the calls themselves
run in test_chain_exec.py's gRPC test and tests/integration/test_replication_failover.py)."""
from exo_cli.main import main


def test_add_and_remove_need_a_name(capsys):
    assert main(["node", "add"]) == 2
    assert "NAME (a db node of the config) is required" in capsys.readouterr().err
    assert main(["node", "remove"]) == 2


def test_no_cluster_up_is_a_clear_error(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("EXO_STATE_DIR", str(tmp_path))
    from exo_cli import state
    monkeypatch.setattr(state, "state_dir", lambda: tmp_path)
    assert main(["node", "list"]) == 2
    assert "no cluster is up" in capsys.readouterr().err
