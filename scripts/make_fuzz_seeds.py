#!/usr/bin/env python3
"""Seed corpora for the fuzz targets from proto/wire_vectors.json (valid and malformed frames)."""
import json
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parents[1]
out = pathlib.Path(sys.argv[1])
vectors = json.loads((root / "proto" / "wire_vectors.json").read_text())
frames = [bytes.fromhex(v["frame_hex"]) for v in vectors["frames"] + vectors["malformed"]]
for target in ("wire_parse_fuzz", "request_handler_fuzz", "db_request_handler_fuzz"):
    (out / target).mkdir(parents=True, exist_ok=True)
for i, f in enumerate(frames):
    (out / "wire_parse_fuzz" / f"seed{i}").write_bytes(f)
    (out / "db_request_handler_fuzz" / f"seed{i}").write_bytes(f)
    if len(f) < 256:  # request_handler_fuzz frames: [len][extra_cap/4][bytes]
        (out / "request_handler_fuzz" / f"seed{i}").write_bytes(bytes([len(f), 128]) + f)
