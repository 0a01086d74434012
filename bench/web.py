"""The web view: what a playground keystroke costs.

``bpestore serve`` runs in a subprocess (uvicorn, as a user starts it) over a store
holding GPT-2 (imported from the shared files); the client posts 1,000 characters of
the corpus to ``/api/encode`` over one kept-alive HTTP connection, ``REQUESTS`` times
per run, and the median latency of each run is kept (the table: the median of the
runs). Beside it, in this process: the inner call (``Tokenizer.encode_with_offsets``
plus the token texts, what the endpoint computes), tiktoken's ``encode_ordinary`` and
HF ``tokenizers``' ``encode`` of the same text; and fresh processes: the server's
start to its first answer, and ``bpestore encode gpt2 TEXT --tokens --json``.
"""

from __future__ import annotations

import http.client
import json
import lzma
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import DATA, REPO, markdown_table

CHARS = 1_000
REQUESTS = 200
CORPORA = REPO.parent / "shared" / "corpora"


def _store(path: Path) -> Path:
    if path.exists():
        return path
    import bpestore

    partial = path.with_suffix(".part")
    partial.unlink(missing_ok=True)
    with bpestore.open(partial) as store:
        store.import_gpt2("gpt2", vocab=CORPORA / "gpt2_vocab.json", merges=CORPORA / "gpt2_merges.txt")
    partial.rename(path)
    return path


def _text(corpus: Path) -> str:
    opener: Callable[..., object] = lzma.open if corpus.suffix == ".xz" else open
    with opener(corpus, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        text = f.read(20 * CHARS)
    start = text.find(" ", len(text) // 3)
    return text[start:start + CHARS]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(conn: http.client.HTTPConnection, body: bytes) -> dict:
    conn.request("POST", "/api/encode", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"/api/encode answered {response.status}: {data[:200]!r}")
    return json.loads(data)


def _serve(db: Path, port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(REPO / "cli.py"), "--db", str(db), "serve", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _first_answer(db: Path, body: bytes) -> float:
    """Seconds from starting ``bpestore serve`` to its first /api/encode answer."""
    port = _free_port()
    started = time.perf_counter()
    server = _serve(db, port)
    try:
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                _post(conn, body)
                return time.perf_counter() - started
            except ConnectionRefusedError:
                time.sleep(0.01)
    finally:
        server.terminate()
        server.wait(10)


def _latencies(port: int, body: bytes) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for _ in range(10):  # warm: the tokenizer loaded, tiktoken's check done
        _post(conn, body)
    times = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        _post(conn, body)
        times.append(time.perf_counter() - started)
    conn.close()
    return times


def _inner(fn: Callable[[], object], n: int = REQUESTS) -> float:
    for _ in range(10):
        fn()
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def web(corpus: Path, corpus_name: str, runs: int, vocab_size: int) -> str:
    import bpestore
    from bpestore.queries import token_text

    db = _store(DATA / "web.db")
    text = _text(corpus)
    body = json.dumps({"ref": "gpt2", "text": text}).encode()
    port = _free_port()
    server = _serve(db, port)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                answer = _post(http.client.HTTPConnection("127.0.0.1", port, timeout=30), body)
                break
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        per_run = [statistics.median(_latencies(port, body)) for _ in range(runs)]
    finally:
        server.terminate()
        server.wait(10)
    print(f"/api/encode medians per run (ms): {' '.join(f'{1000 * t:.2f}' for t in per_run)}",
          file=sys.stderr, flush=True)

    with bpestore.open(db, read_only=True) as store:
        tok = store.tokenizer("gpt2")

        def endpoint_work() -> object:
            ids, spans = tok.encode_with_offsets(text, allowed_special="all")
            return [(i, token_text(tok.decode_single_token_bytes(i)), s) for i, s in zip(ids, spans)]

        inner = _inner(endpoint_work)
        plain = _inner(lambda: tok.encode(text, allowed_special="all"))
        assert answer["ids"] == tok.encode(text, allowed_special="all")
    peers: dict[str, float] = {}
    try:
        import tiktoken
        from tiktoken_ext.openai_public import r50k_pat_str

        from bpestore.formats.gpt2 import str_to_token

        encoder = json.loads((CORPORA / "gpt2_vocab.json").read_text(encoding="utf-8"))
        enc = tiktoken.Encoding("gpt2_offline", pat_str=r50k_pat_str, special_tokens={},  # built offline
                                mergeable_ranks={str_to_token(s): i for s, i in encoder.items()
                                                 if s != "<|endoftext|>"})
        assert enc.encode_ordinary(text) == answer["ids"]
        peers["tiktoken `encode_ordinary`"] = _inner(lambda: enc.encode_ordinary(text))
    except ImportError:
        pass
    try:
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers.models import BPE
        from tokenizers.pre_tokenizers import ByteLevel

        hf = HFTokenizer(BPE.from_file(str(CORPORA / "gpt2_vocab.json"), str(CORPORA / "gpt2_merges.txt")))
        hf.pre_tokenizer = ByteLevel(add_prefix_space=False)
        assert hf.encode(text).ids == answer["ids"]
        peers["HF tokenizers `encode`"] = _inner(lambda: hf.encode(text))
    except ImportError:
        pass

    first = statistics.median(_first_answer(db, body) for _ in range(runs))
    cli = [sys.executable, str(REPO / "cli.py"), "--db", str(db), "encode", "gpt2", text, "--tokens", "--json"]
    fresh = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(cli, check=True, stdout=subprocess.DEVNULL)
        fresh.append(time.perf_counter() - started)
    cli_s = statistics.median(fresh)

    http_ms = 1000 * statistics.median(per_run)
    rows = [[f"`POST /api/encode`, {CHARS:,} characters, `bpestore serve` (HTTP, kept-alive)",
             f"{http_ms:.2f}", "1.00×"],
            ["inner call: `encode_with_offsets` + token texts (what the endpoint computes)",
             f"{1000 * inner:.3f}", f"{inner * 1000 / http_ms:.3f}×"],
            ["bpestore `Tokenizer.encode` (same text)", f"{1000 * plain:.3f}", f"{plain * 1000 / http_ms:.3f}×"]]
    rows += [[name, f"{1000 * t:.3f}", f"{t * 1000 / http_ms:.3f}×"] for name, t in peers.items()]
    rows += [["fresh process: `bpestore serve` start to its first `/api/encode` answer", f"{1000 * first:.0f}",
              f"{first * 1000 / http_ms:.1f}×"],
             [f"fresh process: `bpestore encode gpt2 TEXT --tokens --json` ({CHARS:,} characters)",
              f"{1000 * cli_s:.0f}", f"{cli_s * 1000 / http_ms:.1f}×"]]
    return (f"## Web view: `/api/encode` on {CHARS:,} characters of `{corpus_name}` (GPT-2; medians: "
            f"{REQUESTS} requests per run, {runs} runs)\n\n"
            + markdown_table(["what", "median (ms)", "vs the HTTP request"], rows))


SUITES = {"web": web}
