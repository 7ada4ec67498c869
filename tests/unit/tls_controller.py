"""The config of a controller run alone over TLS in a unit test: OpenFlow on 127.0.0.1:`port`,
gRPC on a unix socket in `tmp_path`, certificates issued into tmp_path/pki."""
from pathlib import Path

import yaml

from exo_common.config import ClusterConfig, parse_config
from exo_common.pki import init_pki


def tls_controller_config(cluster_dict: dict, tmp_path: Path, port: int) -> tuple[ClusterConfig, Path]:
    cluster_dict["controller"].update(openflow_host="127.0.0.1", openflow_port=port,
                                      grpc=f"unix:{tmp_path}/controller.sock", heartbeat_interval_ms=1000)
    cluster_dict["security"] = {"cert_dir": str(tmp_path / "pki")}
    cfg = parse_config(cluster_dict)
    init_pki(cfg.roles(), cfg.cluster.name, cfg.security.cert_dir)
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump()))
    return cfg, path
