"""The Starlette application: pages, the JSON API, and the guards around both.

Every API answer is what the CLI's ``--json`` prints for the same question
(``tests/test_web.py`` compares them). The store is opened read-only. Bad requests
get a JSON ``{"error": ...}`` with a 4xx status, never a traceback: an unknown
version 404, a text over ``MAX_TEXT`` characters 413, a bad parameter 400.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import BpestoreError, ConflictError, DatabaseError, InvalidArgumentError, NotFoundError
from ..limits import MAX_INT
from ..queries import TOKEN_ORDERS, order_tokens, token_text
from ..store import Store
from . import kept

STATIC = Path(__file__).resolve().parent / "static"
# The evaluation text when none is given: a passage of Dickens's *Hard Times* (Gutenberg),
# in no sample bpestore ships (bpestore/data/README.md), so it is no version's training data.
HELD_OUT = STATIC.parent.parent / "data" / "heldout.txt"
MAX_TEXT = 100_000  # characters of text to encode, explain or measure
MAX_BODY = 1_000_000  # bytes of a request body
BODY_SECONDS = 10.0  # the time a request body may take to arrive
GREP_TIMEOUT = 2.0  # seconds a vocab --grep may take
MAX_ROWS = 10_000  # a corpus' top words or changed words in one answer (a corpus may hold millions)
LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
PAGES = {"/": "versions.html", "/version": "version.html", "/playground": "playground.html", "/diff": "diff.html",
         "/token": "token.html", "/corpora": "corpora.html", "/corpus": "corpus.html"}

log = logging.getLogger("bpestore.web")


class RequestError(Exception):
    """A bad request: its status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def error_response(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message, "status": status}, status_code=status)


def status_of(exc: BpestoreError) -> int:
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, InvalidArgumentError):
        return 400
    if isinstance(exc, ConflictError):
        return 409
    if isinstance(exc, DatabaseError):
        return 503
    return 400


class Params:
    """A request's parameters (query string, or a JSON object body), each read once
    by name; a name the endpoint does not take is refused."""

    def __init__(self, values: dict[str, list[Any]], allowed: Iterable[str]) -> None:
        unknown = sorted(set(values) - set(allowed))
        if unknown:
            raise RequestError(400, f"unknown parameter {unknown[0]!r} (this takes: {', '.join(allowed) or 'none'})")
        self.values = values

    @classmethod
    async def of(cls, request: Request, allowed: Iterable[str]) -> Params:
        values: dict[str, list[Any]] = {}
        for key, value in request.query_params.multi_items():
            values.setdefault(key, []).append(value)
        if request.method == "POST":
            if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
                raise RequestError(415, "send a JSON object (Content-Type: application/json)")
            size = request.headers.get("content-length")
            if size is not None and size.isdigit() and int(size) > MAX_BODY:
                raise RequestError(413, f"the request is larger than {MAX_BODY:,} bytes")
            body = bytearray()
            with anyio.move_on_after(BODY_SECONDS) as waited:
                async for chunk in request.stream():
                    body += chunk
                    if len(body) > MAX_BODY:
                        raise RequestError(413, f"the request is larger than {MAX_BODY:,} bytes")
            if waited.cancelled_caught:
                raise RequestError(408, f"the request body took longer than {BODY_SECONDS:g}s to arrive")
            try:
                data = json.loads(body or b"{}")
            except (ValueError, UnicodeDecodeError):
                raise RequestError(400, "the body is not JSON") from None
            except RecursionError:
                raise RequestError(400, "the body is nested too deeply") from None
            if not isinstance(data, dict):
                raise RequestError(400, "the body must be a JSON object")
            for key, value in data.items():
                values.setdefault(key, []).extend(value if isinstance(value, list) else [value])
        return cls(values, allowed)

    def opt(self, name: str, default: str | None = None, *, required: bool = False) -> str | None:
        found = self.values.get(name)
        if not found:
            if required:
                raise RequestError(400, f"missing parameter {name!r}")
            return default
        if len(found) > 1:
            raise RequestError(400, f"parameter {name!r} given more than once")
        value = found[0]
        if not isinstance(value, str):
            raise RequestError(400, f"parameter {name!r} must be a string")
        return value

    def need(self, name: str) -> str:
        value = self.opt(name, required=True)
        assert value is not None
        return value

    def strs(self, name: str) -> list[str]:
        found = self.values.get(name, [])
        if not found or not all(isinstance(v, str) for v in found):
            raise RequestError(400, f"parameter {name!r} must name one or more strings")
        return found

    def num(self, name: str, default: int | None = None, *, low: int = 0, high: int = MAX_INT) -> int | None:
        found = self.values.get(name)
        if not found:
            return default
        value = found[-1] if len(found) == 1 else None
        if isinstance(value, str) and value.strip().lstrip("-").isdigit() and value.isascii():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise RequestError(400, f"parameter {name!r} must be a whole number from {low} to {high:,}")
        return value

    def flag(self, name: str) -> bool:
        value = self.opt(name)
        if value in (None, "", "0", "false"):
            return False
        if value in ("1", "true"):
            return True
        raise RequestError(400, f"parameter {name!r} is 1 or 0")

    def text(self, name: str = "text") -> str:
        value = self.need(name)
        if len(value) > MAX_TEXT:
            raise RequestError(413, f"{name} is longer than {MAX_TEXT:,} characters ({len(value):,})")
        return value


# -- the API: what each CLI --json prints ---------------------------------------------------
def api_versions(store: Store, p: Params) -> Any:
    return [v.to_dict() for v in store.versions(p.opt("name"))]


def api_show(store: Store, p: Params) -> Any:
    return store.version(p.need("ref")).to_dict()


def api_vocab(store: Store, p: Params) -> Any:
    if p.opt("order") is not None or p.opt("start") is not None:
        return vocab_page(store, p)
    tokens = store.vocab(p.need("ref"), grep=p.opt("grep"), prefix=p.opt("prefix"), longest=p.num("longest"),
                         limit=p.num("limit"), timeout=GREP_TIMEOUT)
    return [t.to_dict() for t in tokens]


VOCAB_PAGE = 100
_whole_vocab: dict[str, list[Any]] = {}  # a complete version's tokens, for paging (one version kept)
_whole_vocab_lock = threading.Lock()


def vocab_page(store: Store, p: Params) -> Any:
    """``vocab --order O --start S --limit L --json`` (``limit`` 100 unless given): a page
    of the version's tokens (after ``grep`` and ``prefix``) in that order."""
    ref, order = p.need("ref"), p.opt("order", "id") or "id"
    if order not in TOKEN_ORDERS:
        raise RequestError(400, f"parameter 'order' is one of {', '.join(TOKEN_ORDERS)}, not {order!r}")
    if p.num("longest") is not None:
        raise RequestError(400, "longest is an order of its own: give order=longest instead")
    start, limit = p.num("start", 0) or 0, p.num("limit", VOCAB_PAGE)
    grep, prefix = p.opt("grep"), p.opt("prefix")
    version = store.version(ref)
    first = ("vocab", version.ref, version.fingerprint, order, limit)  # a version page's first list, kept
    if start == 0 and limit is not None and limit <= 1000 and not (grep or prefix) and version.fingerprint is not None:
        page = kept.load(first, b"")
        if page is None:
            page = [t.to_dict() for t in order_tokens(whole_vocab(store, version), order)[:limit]]
            kept.save(first, b"", page)
        return page
    if grep or prefix or version.status != "complete":
        tokens = store.vocab(ref, grep=grep, prefix=prefix, timeout=GREP_TIMEOUT)
    else:
        tokens = whole_vocab(store, version)
    ranked = order_tokens(tokens, order)
    return [t.to_dict() for t in ranked[start:start + (limit if limit is not None else VOCAB_PAGE)]]


def whole_vocab(store: Store, version: Any) -> list[Any]:
    """A complete version's tokens, the last version's kept (a complete version never changes)."""
    key = f"{version.ref} {version.fingerprint}"
    with _whole_vocab_lock:
        tokens = _whole_vocab.get(key) or []
    if not tokens:
        tokens = store.vocab(version.ref)
        with _whole_vocab_lock:
            _whole_vocab.clear()
            _whole_vocab[key] = tokens
    return tokens


def api_merges(store: Store, p: Params) -> Any:
    return [m.to_dict() for m in store.merges(p.need("ref"), start=p.num("start", 0) or 0, limit=p.num("limit"))]


def api_token(store: Store, p: Params) -> Any:
    token = p.need("token")
    if p.flag("id"):
        if not (token.isascii() and token.isdigit()):
            raise RequestError(400, f"with id=1, token is a number, not {token!r}")
        return store.token(p.need("ref"), int(token))
    return store.token(p.need("ref"), token)


class Results:
    """The last answers that cost most (a diff, a curve), kept while their versions
    are complete (a complete version never changes: its fingerprint says which it is)."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self.kept: dict[tuple[Any, ...], Any] = {}
        self.lock = threading.Lock()

    def get(self, store: Store, refs: Iterable[str], key: tuple[Any, ...], compute: Callable[[], Any],
            *, held_out: bool = False) -> Any:
        """``compute()``'s answer, kept; ``held_out``: one on the held-out text, in JSON,
        also kept in a file for the next server (``kept``)."""
        versions = [store.version(ref) for ref in refs]
        if any(v.fingerprint is None for v in versions):
            return compute()
        full = (*((v.ref, v.fingerprint) for v in versions), *key)
        with self.lock:
            if full in self.kept:
                self.kept[full] = self.kept.pop(full)  # the newest now
                return self.kept[full]
        salt = HELD_OUT.read_bytes() if held_out else b""
        value = kept.load(full, salt) if held_out else None
        if value is None:
            value = compute()
            if held_out:
                kept.save(full, salt, value)
        with self.lock:
            self.kept[full] = value
            while len(self.kept) > self.size:
                del self.kept[next(iter(self.kept))]
        return value


RESULTS = Results()
DIFF_VIEWS = Results(4)  # each holds two whole vocabularies (GPT-2 and cl100k: tens of MB)


def api_diff(store: Store, p: Params) -> Any:
    a, b = p.need("a"), p.need("b")
    d = RESULTS.get(store, (a, b), ("diff",), lambda: store.diff(a, b))
    if p.opt("start") is None and p.opt("limit") is None:
        return d
    return diff_page(d, p.num("start", 0) or 0, p.num("limit", 100) or 0)


def diff_page(d: dict[str, Any], start: int, limit: int) -> dict[str, Any]:
    """A page of a diff's long lists (web only; the CLI's --json has them whole):
    ``changed_ids``, ``only_a`` and ``only_b`` from ``start``, ``limit`` of each, and
    ``counts``, each list's whole length."""
    lists = ("changed_ids", "only_a", "only_b")
    return {**d, **{k: d[k][start:start + limit] for k in lists},
            "counts": {k: len(d[k]) for k in lists}, "start": start, "limit": limit}


def api_diff_view(store: Store, p: Params) -> Any:
    """The diff page in one answer: the summary and a page of every section (or of those
    named by ``section``), each from its own ``at_SECTION`` (0 unless given); ``order``
    and ``q`` (a substring, any case) pick and order the tokens only in one version."""
    from ..store.questions import Questions
    from .diffview import SECTIONS, DiffView

    a, b = p.need("a"), p.need("b")
    sections = p.strs("section") if p.values.get("section") else list(SECTIONS)
    limit = p.num("limit", 100, low=1, high=1000) or 100
    order, query = p.opt("order", "rank") or "rank", p.opt("q", "") or ""
    view = DIFF_VIEWS.get(store, (a, b), ("view",), lambda: DiffView(*Questions(store).compared(a, b)))
    return {**view.summary, "order": order, "q": query,
            "sections": {s: view.page(s, p.num(f"at_{s}", 0) or 0, limit, order=order, query=query)
                         for s in sections}}


def api_explain(store: Store, p: Params) -> Any:
    return store.explain(p.need("ref"), p.text()).to_dict()


def api_lineage(store: Store, p: Params) -> Any:
    return [r.to_dict() for r in store.lineage(p.need("name"))]


def api_corpora(store: Store, p: Params) -> Any:
    return [c.to_dict() for c in store.corpora()]


def api_corpus(store: Store, p: Params) -> Any:
    name, top = p.need("name"), p.num("top", 20, high=MAX_ROWS) or 0
    info = store.corpus(name)
    words = store.top_words(name, top) if top and info.kept else []
    return {**info.to_dict(), "sources": [s.to_dict() for s in store.corpus_sources(name)],
            "top_words": [{"word": token_text(w), "count": n} for w, n in words]}


def api_corpus_log(store: Store, p: Params) -> Any:
    return [c.to_dict() for c in store.corpus_log(p.need("name"))]


def api_corpus_diff(store: Store, p: Params) -> Any:
    return store.corpus_diff(p.need("a"), p.need("b"), limit=p.num("limit", 20, high=MAX_ROWS) or 0)


def api_stats(store: Store, p: Params) -> Any:
    """``stats REF... --file F --json`` over the given text (``file`` reads ``"-"``), or
    without one over the held-out text (``file`` names it), or over a stored corpus
    (``corpus``: ``C`` or ``C@N``, exact figures from its word counts)."""
    refs = p.strs("ref")
    corpus = p.opt("corpus")
    if corpus is not None:
        return RESULTS.get(store, refs, ("stats", corpus), lambda: corpus_scores(store, refs, corpus))
    if p.opt("text") is None:
        return RESULTS.get(store, refs, ("stats",), lambda: [s.to_dict() for s in store.stats(refs, HELD_OUT)],
                           held_out=True)
    text = p.text()
    fd, path = tempfile.mkstemp(prefix="bpestore-web-", suffix=".txt")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        results = store.stats(refs, path)
    finally:
        os.unlink(path)
    return [{**s.to_dict(), "file": "-"} for s in results]


def corpus_scores(store: Store, refs: list[str], corpus: str) -> list[dict[str, Any]]:
    """The score card's rows over a corpus generation, from ``Store.corpus_stats`` (the
    corpus-statistics work: exact figures from word counts), in ``stats``' shape."""
    corpus_stats = getattr(store, "corpus_stats", None)
    if corpus_stats is None:
        raise RequestError(501, "scoring on a stored corpus needs the corpus statistics (Store.corpus_stats), "
                                "which this version lacks")
    rows = [s.to_dict() for s in corpus_stats(refs, [corpus])]
    return [{"ref": r["ref"], "file": r["corpus"], "tokens": r["tokens"], "bytes": r["bytes"], "words": r["words"],
             "bytes_per_token": r["bytes_per_token"], "tokens_per_word": r["tokens_per_word"],
             "vocab_use": r["vocab_use"],
             "unknown_share": None if r["unknown"] is None else (r["unknown"] / r["tokens"] if r["tokens"] else 0.0)}
            for r in rows]


class Encoder:
    """Encodes for the API; one encoding at a time (a Tokenizer's caches are not
    shared between threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __call__(self, store: Store, p: Params) -> Any:
        ref, text = p.need("ref"), p.text()
        tok = store.tokenizer(ref)  # cached; its name is the version's NAME@N
        if p.flag("compact"):
            with self.lock:
                return compact_encoding(tok, text)
        with self.lock:
            spans: list[tuple[int, int]] | list[tuple[None, None]]
            try:
                ids, spans = tok.encode_with_offsets(text, allowed_special="all")
            except InvalidArgumentError:  # the tokens do not spell the text: no places to give
                ids = tok.encode(text, allowed_special="all")
                spans = [(None, None)] * len(ids)
            tokens = [{"id": i, "token": token_text(tok.decode_single_token_bytes(i)), "start": start, "end": end}
                      for i, (start, end) in zip(ids, spans)]
        n_bytes = len(text.encode("utf-8", "surrogatepass"))
        return {"ref": tok.name, "ids": ids, "tokens": tokens, "count": len(ids), "bytes": n_bytes,
                "characters": len(text), "bytes_per_token": round(n_bytes / len(ids), 4) if ids else None}


def compact_encoding(tok: Any, text: str) -> dict[str, Any]:
    """What the playground draws, a fifth of the full answer's size: the ids and, beside
    them, each token's text (``token_text``); no places in the text."""
    ids = tok.encode(text, allowed_special="all")
    texts = [token_text(tok.decode_single_token_bytes(i)) for i in ids]
    n_bytes = len(text.encode("utf-8", "surrogatepass"))
    return {"ref": tok.name, "ids": ids, "texts": texts, "count": len(ids), "bytes": n_bytes,
            "characters": len(text), "bytes_per_token": round(n_bytes / len(ids), 4) if ids else None}


def api_progress(store: Store, p: Params) -> Any:
    """Training progress of one version (``ref``), or of every version still training."""
    last = p.num("last", 5, high=100) or 0
    ref = p.opt("ref")
    if ref is not None:
        return store.progress(ref, last=last).to_dict()
    return [store.progress(v.ref, last=last).to_dict() for v in store.versions() if v.status != "complete"]


def api_curve(store: Store, p: Params) -> Any:
    """``plot REF --file F --json`` (its one chart) on ``text``, or without one on the
    held-out text (``HELD_OUT``)."""
    ref, points = p.need("ref"), p.num("points", 50, low=2, high=1000) or 50
    if p.opt("text") is None:
        chart = RESULTS.get(store, (ref,), ("curve", points),
                            lambda: store.chart(ref, HELD_OUT, points=points).to_dict(), held_out=True)
    else:
        text = p.text()
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        chart = RESULTS.get(store, (ref,), ("curve", points, digest),
                            lambda: store.chart(ref, text=text, points=points).to_dict())
    return chart if p.flag("per_rank") or p.opt("per_rank") is None else drawn_only(chart)


def drawn_only(chart: dict[str, Any]) -> dict[str, Any]:
    """A chart without its per-rank lists (``merge_counts``, ``merge_uses``: one number a
    merge, 50,000 on GPT-2), which the version page does not draw (``per_rank=0``)."""
    return {k: v for k, v in chart.items() if k not in ("merge_counts", "merge_uses")}


Endpoint = Callable[[Store, Params], Any]
API: dict[str, tuple[tuple[str, ...], Endpoint]] = {
    "versions": (("name",), api_versions),
    "show": (("ref",), api_show),
    "vocab": (("ref", "grep", "prefix", "longest", "limit", "order", "start"), api_vocab),
    "merges": (("ref", "start", "limit"), api_merges),
    "token": (("ref", "token", "id"), api_token),
    "diff": (("a", "b", "start", "limit"), api_diff),
    "diff_view": (("a", "b", "section", "limit", "order", "q", "at_new_merges", "at_removed_merges", "at_changed_ids",
                   "at_only_a", "at_only_b"), api_diff_view),
    "explain": (("ref", "text"), api_explain),
    "lineage": (("name",), api_lineage),
    "corpora": ((), api_corpora),
    "corpus": (("name", "top"), api_corpus),
    "corpus_log": (("name",), api_corpus_log),
    "corpus_diff": (("a", "b", "limit"), api_corpus_diff),
    "stats": (("ref", "text", "corpus"), api_stats),
    "encode": (("ref", "text", "compact"), Encoder()),
    "progress": (("ref", "last"), api_progress),
    "curve": (("ref", "text", "points", "per_rank"), api_curve),
}


def json_response(data: Any) -> Response:
    body = json.dumps(data, ensure_ascii=False, default=str).encode("utf-8")
    return Response(body, media_type="application/json")


def api_route(store: Store, name: str, allowed: tuple[str, ...], endpoint: Endpoint
              ) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        try:
            params = await Params.of(request, allowed)
            return json_response(await run_in_threadpool(endpoint, store, params))
        except RequestError as exc:
            return error_response(exc.status, str(exc))
        except BpestoreError as exc:
            return error_response(status_of(exc), str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    handle.__name__ = f"api_{name}"
    return handle


def page(filename: str) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        return FileResponse(STATIC / filename, media_type="text/html; charset=utf-8")
    return handle


_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(?::[0-9]{1,5})?")


class Guard:
    """Refuses a request whose Host header is not one of ours (DNS rebinding: a page
    elsewhere resolving its own name to 127.0.0.1), and sets the security headers
    (a strict Content-Security-Policy: only our own scripts and styles) on every answer."""

    def __init__(self, app: ASGIApp, hosts: Iterable[str]) -> None:
        self.app = app
        self.hosts = {h.lower() for h in hosts}

    def allowed(self, host: str) -> bool:
        """Whether a Host header names one of ours: a name or ``[address]``, then at most a port."""
        match = _HOST.fullmatch(host.strip().lower())
        return match is not None and match.group(1) in self.hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host", b"").decode("latin-1")
        if not self.allowed(host):
            response = error_response(400, f"this server answers to {', '.join(sorted(self.hosts))}, "
                                           f"not to Host {host!r}")
            await response(scope, receive, self._secured(send))
            return
        await self.app(scope, receive, self._secured(send))

    @staticmethod
    def _secured(send: Send) -> Send:
        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                         (b"x-frame-options", b"DENY"), (b"referrer-policy", b"no-referrer"),
                         (b"cache-control", b"no-store")]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)
        return secured


async def http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status == 404 and not request.url.path.startswith("/api/"):
        return not_found_page()
    detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
    return error_response(status, str(detail))


def not_found_page() -> Response:
    """The HTML page for an unknown address outside the API (the API answers JSON)."""
    return FileResponse(STATIC / "404.html", status_code=404, media_type="text/html; charset=utf-8")


async def favicon(request: Request) -> Response:
    return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")


async def server_error(request: Request, exc: Exception) -> Response:
    log.exception("error answering %s", request.url.path)
    return error_response(500, "internal error (the server's log has the details)")


def build_app(store_url: str | None, *, allowed_hosts: Iterable[str] = ()) -> Starlette:
    store = Store(store_url, read_only=True)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        store.close()

    routes: list[Any] = [Route(f"/api/{name}", api_route(store, name, allowed, endpoint), methods=["GET", "POST"])
                         for name, (allowed, endpoint) in API.items()]
    routes += [Route(path, page(filename), methods=["GET"]) for path, filename in PAGES.items()]
    routes.append(Route("/favicon.ico", favicon, methods=["GET"]))
    routes.append(Mount("/static", StaticFiles(directory=STATIC), name="static"))
    app = Starlette(routes=routes, lifespan=lifespan,
                    middleware=[Middleware(Guard, hosts=[*LOOPBACK, *allowed_hosts])],
                    exception_handlers={HTTPException: http_error, Exception: server_error})
    app.state.store = store
    return app
