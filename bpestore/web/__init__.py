"""``bpestore serve``: a local, read-only web view of a store.

Pages (plain HTML, CSS and JavaScript shipped in ``static/``: no build step,
nothing fetched from the network) over a JSON API whose answers are the CLI's
``--json`` outputs. Needs the ``web`` extra: ``pip install 'bpestore[web]'``.

>>> app = create_app("bpestore.db")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import ConflictError, InvalidArgumentError

if TYPE_CHECKING:
    from starlette.applications import Starlette

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def _require_web() -> None:
    try:
        import starlette  # noqa: F401
    except ModuleNotFoundError:
        raise InvalidArgumentError("the web view needs its extra: pip install 'bpestore[web]'") from None


def create_app(store_url: str | None = None, *, allowed_hosts: Iterable[str] = ()) -> Starlette:
    """The web application over the store at ``store_url`` (opened read-only).

    Requests must name this machine's loopback (``127.0.0.1``, ``localhost``,
    ``[::1]``) or one of ``allowed_hosts`` in their Host header (DNS rebinding).
    """
    _require_web()
    from .app import build_app

    return build_app(store_url, allowed_hosts=allowed_hosts)


def serve(store_url: str | None = None, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          allowed_hosts: Iterable[str] = (), app: Starlette | None = None) -> None:
    """Serve ``create_app(store_url)`` (or ``app``) on ``host:port`` until interrupted;
    ``host`` itself is an allowed Host name unless it is a wildcard address.
    Slow and idle connections are closed (``bpestore.web.server``)."""
    _require_web()
    try:
        import uvicorn  # noqa: F401
    except ModuleNotFoundError:
        raise InvalidArgumentError("the web view needs its extra: pip install 'bpestore[web]'") from None
    if app is None:
        app = create_app(store_url, allowed_hosts=[*allowed_hosts, *bound_host(host)])
    check_address(host, port)
    from .server import run

    run(app, host, port)


def check_address(host: str, port: int) -> None:
    """That ``host:port`` can be listened on (a ``ConflictError`` saying why not)."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        raise ConflictError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", params=("host", "port")) from None


def bound_host(host: str) -> list[str]:
    """The Host name a listening address answers to: none for a wildcard."""
    return [] if host in ("0.0.0.0", "::", "") else [f"[{host}]" if ":" in host else host]


__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "bound_host", "check_address", "create_app", "serve"]
