"""`serve`: the local web view."""

from __future__ import annotations

import os
import sys
import threading
from urllib.parse import unquote

import click

from .base import Context
from .options import count_range


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on (another than 127.0.0.1 exposes the store to the network).")
@click.option("--port", type=count_range(1, 65535), default=8765, show_default=True, help="The port to listen on.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Another name this server may be reached by (its Host header); repeatable.")
@click.pass_obj
def serve(obj: Context, host: str, port: int, allow_hosts: tuple[str, ...]) -> None:
    """Serve a read-only web view of the store: versions, training progress, a token playground."""
    from ..web import bound_host, check_address, create_app
    from ..web import serve as run

    app = create_app(obj.db, allowed_hosts=[*allow_hosts, *bound_host(host)])
    check_address(host, port)
    store = app.state.store
    where = store.location
    if store.engine.dialect.name == "sqlite" and store.engine.url.database:
        where = unquote(store.engine.url.database.removeprefix("file:"))
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"serving {where} (read-only) at http://{shown}:{port}/ (Ctrl-C stops)", err=True)
    run(host=host, port=port, app=app)
    busy = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
    if busy:  # an answer still computing past the stop's wait: the store is read-only, nothing to finish
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
