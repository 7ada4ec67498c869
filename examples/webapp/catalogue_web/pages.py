"""The catalogue's HTML, from plain data (no I/O): every value is escaped."""
from __future__ import annotations

from html import escape

STYLE = "body{font-family:sans-serif;max-width:40em;margin:2em auto}dt{font-weight:bold}"


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset=utf-8><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{body}</body></html>")


def item_page(item: dict, source: str) -> str:
    """source: where the app read the item ("cluster", or "source of truth" on a cache miss)."""
    price = f"{item['price_cents'] // 100}.{item['price_cents'] % 100:02d}"
    stock = f"{item['stock']} in stock" if item["stock"] else "out of stock"
    body = (f"<p><a href=\"/\">Catalogue</a> / {escape(item['category'])}</p>"
            f"<h1>{escape(item['name'])}</h1>"
            f"<p>{escape(item['description'])}</p>"
            f"<dl><dt>Price</dt><dd>&euro; {price}</dd><dt>Availability</dt><dd>{escape(stock)}</dd></dl>"
            f"<p><small>item {int(item['id'])}, read from the {escape(source)}</small></p>")
    return _page(item["name"], body)


def index_page(items: list[dict], total: int) -> str:
    rows = "".join(f"<li><a href=\"/item/{int(i['id'])}\">{escape(i['name'])}</a></li>" for i in items)
    return _page("Catalogue", f"<h1>Catalogue</h1><p>{total} items; the first {len(items)}:</p><ul>{rows}</ul>")


def error_page(status: int, message: str) -> str:
    return _page(f"{status}", f"<h1>{status}</h1><p>{escape(message)}</p>")
