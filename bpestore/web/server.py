"""uvicorn, set up so that no client holds the server: a connection must send each
request's head within ``HEAD_SECONDS`` (of opening, or of the last answer), an idle
kept-alive one is closed after ``IDLE_SECONDS``, a body must arrive within the
app's own limit (``app.BODY_SECONDS``), and a stop (SIGTERM, Ctrl-C) waits at most
``STOP_SECONDS`` for the requests under way."""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_SECONDS = 10.0  # to send a request's line and headers
IDLE_SECONDS = 5  # a kept-alive connection waiting for its next request
STOP_SECONDS = 3  # a stop waits this long for answers under way
MAX_HEAD = 64 * 1024  # bytes of a request's line and headers
MAX_CONNECTIONS = 100  # connections at once; more get 503


class TimedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on each request's head."""

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(HEAD_SECONDS, self._head_too_slow)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._head_timer.cancel()
        self._head_timer = self.loop.call_later(HEAD_SECONDS, self._head_too_slow)

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_timer.cancel()
        super().connection_lost(exc)

    def _head_too_slow(self) -> None:
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being answered (its body has the app's own deadline)
        if not self.transport.is_closing():
            self.transport.close()


def run(app: Any, host: str, port: int) -> None:
    """Serve ``app`` until stopped."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False, http=TimedH11Protocol,
                timeout_keep_alive=IDLE_SECONDS, timeout_graceful_shutdown=STOP_SECONDS,
                h11_max_incomplete_event_size=MAX_HEAD, limit_concurrency=MAX_CONNECTIONS)
