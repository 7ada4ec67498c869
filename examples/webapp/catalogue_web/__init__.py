"""A product catalogue whose pages read through Exoskeleton (docs/web-demo.md).

    store.py         the source of truth: a SQLite file of items (and the command that makes it)
    read_through.py  an item from the cluster, or from the store and then into the cluster
    pages.py         the HTML of a page (pure)
    settings.py      the app's environment variables, checked
    app.py           the FastAPI app: /item/<id>, /, /healthz

Runs under uvicorn with several workers as an unprivileged user; the cluster is reached through
the host's exo-proxy unix socket (exoskeleton.AsyncClient(transport="proxy")).
"""
