"""The catalogue's source of truth: a SQLite file with one row per item.

The web app opens it read-only; the cluster is the cache in front of it. `create` makes the file
(deterministic for a seed, so every run serves the same pages):

    python3 -m catalogue_web.store --db items.sqlite --items 10000
"""
from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
from pathlib import Path

WORDS = ("anchor", "birch", "cobalt", "delta", "ember", "fjord", "granite", "harbor", "indigo", "juniper",
         "kestrel", "lumen", "meridian", "nimbus", "orchid", "pylon", "quartz", "raven", "sable", "tundra")
CATEGORIES = ("kitchen", "garden", "tools", "books", "outdoor", "office", "music", "toys")
SCHEMA = """CREATE TABLE items (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    price_cents INTEGER NOT NULL,
    stock INTEGER NOT NULL,
    description TEXT NOT NULL)"""


def make_item(item_id: int, rng: random.Random) -> dict:
    name = " ".join(rng.choice(WORDS).capitalize() for _ in range(2)) + f" {item_id}"
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 30)))
    return {"id": item_id, "name": name, "category": rng.choice(CATEGORIES),
            "price_cents": rng.randint(199, 49_999), "stock": rng.randint(0, 500),
            "description": words.capitalize() + "."}


def create(path: Path, n_items: int, seed: int = 1) -> None:
    """Write items 1..n_items to a new SQLite file at `path` (replacing one that is there)."""
    if n_items < 1:
        raise ValueError(f"--items: must be at least 1 (got {n_items})")
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    rng = random.Random(seed)
    with sqlite3.connect(tmp) as db:
        db.execute(SCHEMA)
        db.executemany("INSERT INTO items VALUES (:id, :name, :category, :price_cents, :stock, :description)",
                       (make_item(i, rng) for i in range(1, n_items + 1)))
    db.close()
    tmp.replace(path)


class Store:
    """Read-only access to the items file (one connection per worker process)."""

    def __init__(self, path: str | Path):
        if not Path(path).is_file():
            raise FileNotFoundError(f"EXO_WEB_DB: no SQLite file at {path}")
        self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self._db.row_factory = sqlite3.Row

    def item(self, item_id: int) -> dict | None:
        row = self._db.execute("SELECT * FROM items WHERE id = ?", (item_id,)).fetchone()
        return dict(row) if row is not None else None

    def count(self) -> int:
        return self._db.execute("SELECT count(*) FROM items").fetchone()[0]

    def close(self) -> None:
        self._db.close()


def encode(item: dict) -> bytes:
    """The cluster's copy of an item: compact JSON (well under one frame's 1,452 bytes)."""
    return json.dumps(item, separators=(",", ":"), sort_keys=True).encode()


def decode(raw: bytes) -> dict:
    return json.loads(raw)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="catalogue_web.store", description="write the catalogue's SQLite file")
    p.add_argument("--db", required=True, type=Path)
    p.add_argument("--items", required=True, type=int)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    try:
        create(a.db, a.items, a.seed)
    except ValueError as err:
        print(f"catalogue_web.store: {err}", file=sys.stderr)
        return 2
    print(f"wrote {a.items} items to {a.db}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
