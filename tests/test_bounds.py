"""Bounds on what a user or a client controls: explain's text, a --grep's time (CLI and
web), request bodies (size, depth, time), slow and idle connections, and a server stop
that does not wait on answers still computing."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import bpestore

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("BPESTORE_DB", None)
    return env


def _limited(memory: int = 1 << 30):  # noqa: ANN202
    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    return limit


def _python(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter under a 1 GB address-space limit; a run past
    ``timeout`` fails the test (it is what an unbounded piece of work does)."""
    try:
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=_env(),
                              timeout=timeout, preexec_fn=_limited())
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout}s")


@pytest.fixture(scope="module")
def long_a(tmp_path_factory) -> str:
    """A store whose version 'a' has long tokens of a's and of a's ending with b."""
    db = str(tmp_path_factory.mktemp("bounds") / "b.db")
    corpus = Path(db).with_suffix(".txt")
    corpus.write_text(("a" * 64 + " " + "a" * 47 + "b ") * 20 + "hello world ", encoding="utf-8")
    with bpestore.open(db) as store:
        store.ingest("c", [corpus], pretokenizer="whitespace", workers=1)
        store.train("a", corpus="c", vocab_size=330)
    return db


def test_explain_of_a_long_word_is_refused_quickly(long_a):
    word = "a" * 100_000  # one pre-token, merged step by step
    result = _python("import sys; from bpestore.cli import main; sys.argv = ['bpestore', *sys.argv[1:]]; main()",
                     "--db", long_a, "explain", "a@1", word)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and "explain a shorter text" in lines[0], result.stderr
    with bpestore.open(long_a) as store:
        with pytest.raises(bpestore.InvalidArgumentError, match="at most 100,000 characters"):
            store.explain("a@1", "x" * 100_001)
        text = "a" * 1_000 + " hello"  # within the bounds: explained, equal to encode
        assert store.explain("a@1", text).ids == store.tokenizer("a@1").encode(text)


_LATE_GREP = r"""
import time
from bpestore.queries import TimedMatcher
m = TimedMatcher(r"^(a|aa)+c$", 0.05)
m(b"first")  # starts the clock
time.sleep(0.1)  # the deadline passes between two tokens
start = time.monotonic()
print(m(b"a" * 60 + b"b"), m.timed_out, round(time.monotonic() - start, 1))
"""


def test_a_grep_deadline_passed_between_tokens_stops_the_next_search():
    result = _python(_LATE_GREP, timeout=30)
    assert result.stdout.split() == ["False", "True", "0.0"], result.stderr


def test_cli_grep_has_a_time_limit(long_a):
    code = ("import sys; import bpestore.cli.queries as q; q.GREP_SECONDS = 0.5; from bpestore.cli import main; "
            "sys.argv = ['bpestore', *sys.argv[1:]]; main()")
    result = _python(code, "--db", long_a, "vocab", "a@1", "--grep", r"^(a|aa)+c$", timeout=60)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and "took longer than 0.5s" in lines[0], lines


# -- the server ----------------------------------------------------------------------------
_SERVER = r"""
import os, sys, threading
from pathlib import Path
import bpestore.web.app as app
import bpestore.web.server as server
server.HEAD_SECONDS, server.IDLE_SECONDS, app.BODY_SECONDS = 1.0, 1, 1.0  # shorter, for the test
def slow(store, params):
    Path(os.environ["BPESTORE_TEST_ANSWERING"]).touch()  # the answer is under way
    threading.Event().wait(120)
app.API["lineage"] = (("name",), slow)
from bpestore.cli import main
sys.argv = ["bpestore", *sys.argv[1:]]
main()
"""


@pytest.fixture
def server(long_a, tmp_path):
    pytest.importorskip("uvicorn")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**_env(), "BPESTORE_TEST_ANSWERING": str(tmp_path / "answering")}
    process = subprocess.Popen([sys.executable, "-c", _SERVER, "--db", long_a, "serve", "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, "bpestore serve did not start"
            time.sleep(0.1)
    yield process, port
    process.kill()
    process.wait(10)


def _closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the server closed ``sock`` within ``seconds``, and what it sent."""
    sock.settimeout(seconds)
    got = b""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True, got
            got += data
    except (TimeoutError, ConnectionResetError):
        return False, got


def test_slow_and_idle_connections_are_closed(server):
    _, port = server
    slow_head = socket.create_connection(("127.0.0.1", port))
    slow_head.sendall(b"GET /api/versions HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # ... and the rest never
    idle = socket.create_connection(("127.0.0.1", port))
    idle.sendall(b"GET /api/versions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    slow_body = socket.create_connection(("127.0.0.1", port))
    slow_body.sendall(b"POST /api/versions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100\r\n\r\n{")
    for sock in (slow_head, idle, slow_body):
        closed, got = _closed_within(sock, 10)
        sock.close()
        assert closed, got
        if sock is idle:
            assert got.startswith(b"HTTP/1.1 200")
        if sock is slow_body:
            assert got.startswith(b"HTTP/1.1 408"), got


def test_a_stop_does_not_wait_for_answers_under_way(server, tmp_path):
    process, port = server
    busy = socket.create_connection(("127.0.0.1", port))
    busy.sendall(b"GET /api/lineage?name=a HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    deadline = time.monotonic() + 30
    while not (tmp_path / "answering").exists():
        assert time.monotonic() < deadline, "the answer never began"
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    start = time.monotonic()
    process.wait(20)
    assert time.monotonic() - start < 10
    busy.close()


def test_a_deeply_nested_body_is_a_400(long_a):
    pytest.importorskip("httpx")
    from starlette.testclient import TestClient

    from bpestore.web import create_app

    with TestClient(create_app(long_a), base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        deep = client.post("/api/encode", content=b"[" * 500_000 + b"]" * 500_000,
                           headers={"content-type": "application/json"})
    assert deep.status_code == 400 and "nested too deeply" in deep.json()["error"]


def test_slow_clients_reopening_leave_room_for_requests(server):
    """110 connections that send a head's first line and nothing more, reopened as soon as
    they are closed (more than the server keeps), while 30 ordinary requests come one by
    one: each is answered, within a second."""
    import threading

    _, port = server
    stop = threading.Event()

    def slow_client() -> None:
        while not stop.is_set():
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                sock.sendall(b"GET /api/versions HTTP/1.1\r\n")
                sock.settimeout(0.5)
                while not stop.is_set():
                    try:
                        if not sock.recv(1024):
                            break  # closed by the server: open another
                    except TimeoutError:
                        continue
                sock.close()
            except OSError:
                time.sleep(0.05)

    threads = [threading.Thread(target=slow_client, daemon=True) for _ in range(110)]
    for t in threads:
        t.start()
    time.sleep(2)  # every slow client connected (and some already replaced)
    answered = []
    try:
        for _ in range(30):
            start = time.monotonic()
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"GET /api/versions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                sock.settimeout(5)
                got = b""
                try:
                    while chunk := sock.recv(65536):
                        got += chunk
                except (TimeoutError, ConnectionResetError):
                    pass
            answered.append((got[:12], time.monotonic() - start))
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    ok = [seconds for status, seconds in answered if status == b"HTTP/1.1 200"]
    assert len(ok) >= 29 and max(ok) < 1.0, [a for a in answered if a[0] != b"HTTP/1.1 200" or a[1] >= 1.0]
