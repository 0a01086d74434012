"""uvicorn, set up so that no client holds the server: a connection must send each
request's head within ``HEAD_SECONDS`` (of opening, or of the last answer), an idle
kept-alive one is closed after ``IDLE_SECONDS``, a body must arrive within the
app's own limit (``app.BODY_SECONDS``), and a stop (SIGTERM, Ctrl-C) waits at most
``STOP_SECONDS`` for the requests under way.

At most ``MAX_CONNECTIONS`` connections are kept: one more makes room by closing the
connection that has waited longest without sending a request's head (a slow or idle
client), once that one had ``GRACE_SECONDS``; so clients that send nothing cannot
keep out those that ask: a request sent at once is answered however many slow
connections are open or reopened."""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_SECONDS = 10.0  # to send a request's line and headers
IDLE_SECONDS = 5  # a kept-alive connection waiting for its next request
STOP_SECONDS = 3  # a stop waits this long for answers under way
MAX_HEAD = 64 * 1024  # bytes of a request's line and headers
MAX_CONNECTIONS = 100  # kept at once: one more closes the longest waiting for a head
GRACE_SECONDS = 1.0  # a connection this new is not closed for another ...
HARD_MAX_CONNECTIONS = 4 * MAX_CONNECTIONS  # ... unless there are this many; past it, requests get 503


class TimedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on each request's head, and room
    for a new connection made by closing the one waiting longest for its head."""

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        waiting, now = self._waiting(), self.loop.time()
        while len(self.connections) > MAX_CONNECTIONS and waiting:
            oldest, since = next(iter(waiting.items()))
            if now - since < GRACE_SECONDS and len(self.connections) <= HARD_MAX_CONNECTIONS:
                break  # each has had less time than a client sending at once needs: over the cap for now
            waiting.pop(oldest)
            if not oldest.transport.is_closing():
                oldest.transport.close()
        waiting[self] = now
        self._head_timer = self.loop.call_later(HEAD_SECONDS, self._head_too_slow)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not None:  # a request's head arrived: it is being answered
            self._waiting().pop(self, None)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._waiting()[self] = self.loop.time()  # waiting for the next request's head
        self._head_timer.cancel()
        self._head_timer = self.loop.call_later(HEAD_SECONDS, self._head_too_slow)

    def connection_lost(self, exc: Exception | None) -> None:
        self._waiting().pop(self, None)
        self._head_timer.cancel()
        super().connection_lost(exc)

    def _waiting(self) -> dict[TimedH11Protocol, float]:
        """The server's connections waiting for a request's head, by when they began to, oldest first."""
        state: Any = self.server_state
        if not hasattr(state, "bpestore_waiting"):
            state.bpestore_waiting = {}
        return state.bpestore_waiting

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
                h11_max_incomplete_event_size=MAX_HEAD, limit_concurrency=HARD_MAX_CONNECTIONS + 1)
