"""docs/security.md's "Who may call what" table says what control.proto's allowed_roles options
say, rpc for rpc (the options are the one definition; the table is for readers)."""
import re
from pathlib import Path

from exoproto import control_pb2

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
ROW = re.compile(r"^\| `(\w+)\.(\w+)` \| ([a-z, ]+) \|")


def doc_table(text: str) -> dict[str, list[str]]:
    return {f"{m.group(1)}.{m.group(2)}": [r.strip() for r in m.group(3).split(",")]
            for m in map(ROW.match, text.splitlines()) if m}


def proto_table() -> dict[str, list[str]]:
    return {f"{svc.name}.{m.name}": list(m.GetOptions().Extensions[control_pb2.allowed_roles])
            for svc in control_pb2.DESCRIPTOR.services_by_name.values() for m in svc.methods}


def test_the_doc_table_is_control_proto():
    assert doc_table(DOC.read_text()) == proto_table()


def test_the_comparison_catches_a_wrong_row():
    text = DOC.read_text().replace("| `CacheNode.Reset` | controller |", "| `CacheNode.Reset` | operator |")
    assert doc_table(text) != proto_table()
