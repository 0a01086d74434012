"""The web view's JSON API through Starlette's test client, on SQLite and PostgreSQL:
each answer equals what the CLI's --json prints for the same question; bad requests get
JSON 4xx answers; the store behind it is read-only (refused by the store and by the
database itself); training progress is read from the checkpointed merge rows."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the web extra (starlette) is not installed: pip install -e '.[test]'")
pytest.importorskip("httpx", reason="starlette's TestClient needs httpx: pip install -e '.[test]'")

from click.testing import CliRunner  # noqa: E402
from sqlalchemy import text  # noqa: E402
from sqlalchemy.exc import SQLAlchemyError  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

import bpestore  # noqa: E402
from bpestore import ReadOnlyError, Store  # noqa: E402
from bpestore.cli import cli  # noqa: E402
from bpestore.web import app as web_app  # noqa: E402
from bpestore.web import create_app  # noqa: E402

from .conftest import pg_schema  # noqa: E402

HELD_OUT = Path(bpestore.__file__).resolve().parent / "data" / "heldout.txt"  # the web's default evaluation text

XSS = '<script>"x"</script>'


def build_store(url: str, tmp_path) -> None:
    """books (the packaged sample), en@1 (400 tokens), en@2 extending it, en@prod -> en@1,
    and xss@1, whose tokens hold markup and quotes."""
    corpus = tmp_path / "xss.txt"
    corpus.write_text(f"{XSS} plain\n" * 50, encoding="utf-8")
    with bpestore.open(url) as store:
        store.ingest("books", [str(bpestore.sample_path())], workers=1)
        store.train("en", corpus="books", vocab_size=400)
        store.train("en", corpus="books", vocab_size=450, parent="en@1")
        store.set_alias("en@1", "prod")
        store.ingest("xss", [str(corpus)], pretokenizer="whitespace", workers=1)
        store.train("xss", corpus="xss", merges=40)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("web")
    if request.param == "sqlite":
        url = str(tmp / "web.db")
        build_store(url, tmp)
        yield url
        return
    with pg_schema() as url:
        build_store(url, tmp)
        yield url


@pytest.fixture(scope="module")
def client(db):
    with TestClient(create_app(db), base_url="http://127.0.0.1:8765") as c:
        yield c


def cli_json(db: str, *args: str):
    result = CliRunner().invoke(cli, ["--db", db, *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def ok(client, path: str, **params):
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    return response.json()


EQUAL_TO_CLI = [
    (("versions",), "/api/versions", {}),
    (("versions", "en"), "/api/versions", {"name": "en"}),
    (("show", "en@prod"), "/api/show", {"ref": "en@prod"}),
    (("show", "en"), "/api/show", {"ref": "en"}),
    (("vocab", "en@1", "--grep", "ula$"), "/api/vocab", {"ref": "en@1", "grep": "ula$"}),
    (("vocab", "en@2", "--longest", "7"), "/api/vocab", {"ref": "en@2", "longest": "7"}),
    (("vocab", "en@1", "--prefix", " th", "--limit", "4"), "/api/vocab",
     {"ref": "en@1", "prefix": " th", "limit": "4"}),
    (("vocab", "xss@1"), "/api/vocab", {"ref": "xss@1"}),
    (("merges", "en@1", "--start", "20", "--limit", "9"), "/api/merges", {"ref": "en@1", "start": "20", "limit": "9"}),
    (("merges", "xss@1"), "/api/merges", {"ref": "xss@1"}),
    (("token", "en@1", " the"), "/api/token", {"ref": "en@1", "token": " the"}),
    (("token", "en@2", "--id", "420"), "/api/token", {"ref": "en@2", "token": "420", "id": "1"}),
    (("diff", "en@1", "en@2"), "/api/diff", {"a": "en@1", "b": "en@2"}),
    (("explain", "en@1", "Dracula's castle"), "/api/explain", {"ref": "en@1", "text": "Dracula's castle"}),
    (("lineage", "en"), "/api/lineage", {"name": "en"}),
    (("corpora",), "/api/corpora", {}),
    (("corpus", "show", "books", "--top", "5"), "/api/corpus", {"name": "books", "top": "5"}),
    (("corpus", "log", "books"), "/api/corpus_log", {"name": "books"}),
]


@pytest.mark.parametrize("args,path,params", EQUAL_TO_CLI, ids=[" ".join(a) for a, _, _ in EQUAL_TO_CLI])
def test_api_answers_what_the_cli_json_prints(db, client, args, path, params):
    assert ok(client, path, **params) == cli_json(db, *args)


def test_stats_over_a_text_equals_the_cli_on_a_file(db, client, tmp_path):
    sample = "The Count smiled. 'Welcome to my house!'\nI am Dracula.\n" * 20
    (tmp_path / "t.txt").write_text(sample, encoding="utf-8")
    expected = cli_json(db, "stats", "en@1", "en@2", "--file", str(tmp_path / "t.txt"))
    got = client.post("/api/stats", json={"ref": ["en@1", "en@2"], "text": sample}).json()
    assert [{**s, "file": None} for s in got] == [{**s, "file": None} for s in expected]


@pytest.mark.parametrize("ref", ["en@1", "en@prod", "xss@1"])
def test_encode_gives_the_cli_tokens_with_their_places(db, client, ref):
    sample = f"I am Dracula; {XSS} and I bid you welcome, Mr. Harker. héllo 東京\n<|endoftext|> 42"
    got = client.post("/api/encode", json={"ref": ref, "text": sample}).json()
    expected = cli_json(db, "encode", ref, sample, "--tokens")
    assert [{"id": t["id"], "token": t["token"]} for t in got["tokens"]] == expected
    assert got["ids"] == [t["id"] for t in expected] and got["count"] == len(expected)
    assert got["bytes"] == len(sample.encode()) and got["bytes_per_token"] == round(got["bytes"] / got["count"], 4)
    # The spans cover the text in order, each token's characters (partial characters: the whole one).
    # xss@1's whitespace pre-tokenizer drops the spaces: its tokens have no places in the text.
    if ref == "xss@1":
        assert all(t["start"] is None and t["end"] is None for t in got["tokens"])
    else:
        assert got["tokens"][0]["start"] == 0 and got["tokens"][-1]["end"] == len(sample)
        for t in got["tokens"]:
            if "\\x" not in t["token"]:
                assert sample[t["start"]:t["end"]] == t["token"]
    # GET gives the same.
    assert ok(client, "/api/encode", ref=ref, text=sample) == got


def test_curve_is_the_plot_json(db, client, tmp_path):
    sample = "The Count smiled. 'Welcome to my house!'\nI am Dracula.\n" * 30
    (tmp_path / "t.txt").write_text(sample, encoding="utf-8")
    expected = cli_json(db, "plot", "en@2", "--file", str(tmp_path / "t.txt"), "--points", "7")[0]
    got = client.post("/api/curve", json={"ref": "en@2", "text": sample, "points": 7}).json()
    assert {**got, "file": None} == {**expected, "file": None}
    whole = ok(client, "/api/curve", ref="en@1", points="5")  # on the held-out text
    assert whole == cli_json(db, "plot", "en@1", "--file", str(HELD_OUT), "--points", "5")[0]
    assert whole["curve"][-1]["merges"] == 400 - 256 and whole["curve"][0]["bytes_per_token"] == 1.0
    assert client.get("/api/curve", params={"ref": "en@1", "points": "1"}).status_code == 400


def test_markup_in_tokens_is_returned_as_data(client):
    tokens = [t["token"] for t in ok(client, "/api/vocab", ref="xss@1")]
    assert any("<script>" in t for t in tokens) and any('"' in t for t in tokens)
    assert any(XSS in t["token"] for t in ok(client, "/api/encode", ref="xss@1", text=XSS)["tokens"])


def test_progress_of_a_complete_version_is_its_merge_rows(db, client):
    info = ok(client, "/api/progress", ref="en@1", last="3")
    merges = cli_json(db, "merges", "en@1")
    assert info["status"] == "complete" and info["merges"] == len(merges) == info["target_merges"]
    assert info["fraction"] == 1.0 and info["last_merges"] == merges[-3:]
    assert ok(client, "/api/progress") == []  # nothing is training


@pytest.mark.parametrize("path,params,status,message", [
    ("/api/show", {"ref": "en@9"}, 404, "en has no version 9"),
    ("/api/show", {"ref": "nope"}, 404, "nope"),
    ("/api/encode", {"ref": "en@7", "text": "hi"}, 404, "en has no version 7"),
    ("/api/show", {}, 400, "missing parameter 'ref'"),
    ("/api/show", {"ref": "en@1", "colour": "red"}, 400, "unknown parameter 'colour'"),
    ("/api/merges", {"ref": "en@1", "limit": "many"}, 400, "'limit' must be a whole number"),
    ("/api/merges", {"ref": "en@1", "start": "-1"}, 400, "'start' must be a whole number"),
    ("/api/vocab", {"ref": "en@1", "grep": "(unclosed"}, 400, "grep is not a regular expression"),
    ("/api/token", {"ref": "en@1", "token": "x", "id": "1"}, 400, "token is a number"),
    ("/api/token", {"ref": "en@1", "token": "zzzzqq"}, 404, "is not a token of en@1"),
    ("/api/encode", {"ref": "en@1", "text": "x" * 100_001}, 413, "longer than 100,000 characters"),
    ("/api/explain", {"ref": "en@1", "text": "x" * 100_001}, 413, "longer than 100,000 characters"),
    ("/api/nothing", {}, 404, "Not Found"),
    ("/api/show", {"ref": "e\0n"}, 404, "no NUL character"),
    ("/api/corpus", {"name": "books", "top": "10001"}, 400, "'top' must be a whole number from 0 to 10,000"),
    ("/api/corpus_diff", {"a": "books", "b": "books", "limit": str(2**31 - 1)}, 400, "from 0 to 10,000"),
    ("/api/versions", {"name": "e\0n"}, 404, "no NUL character"),
    ("/api/corpus", {"name": "books\0"}, 404, "no NUL character"),
    ("/api/explain", {"ref": "en@1", "text": "ab" * 40_000}, 400, "explain a shorter text"),
])
def test_bad_requests_get_a_json_4xx(client, path, params, status, message):
    long = len(params.get("text", "")) > 5_000  # too long for a URL: as a JSON body
    response = client.post(path, json=params) if long else client.get(path, params=params)
    assert response.status_code == status, response.text
    body = response.json()
    assert message in body["error"] and body["status"] == status
    assert "Traceback" not in response.text


def test_bodies_are_checked(client):
    big = client.post("/api/encode", content=b"{" + b" " * 1_100_000 + b"}",
                      headers={"content-type": "application/json"})
    assert big.status_code == 413 and "larger than" in big.json()["error"]
    form = client.post("/api/encode", content=b"ref=en&text=hi", headers={"content-type": "text/plain"})
    assert form.status_code == 415
    broken = client.post("/api/encode", content=b"{nope", headers={"content-type": "application/json"})
    assert broken.status_code == 400 and broken.json()["error"] == "the body is not JSON"
    listed = client.post("/api/encode", json=["en", "hi"])
    assert listed.status_code == 400
    typed = client.post("/api/encode", json={"ref": "en", "text": 5})
    assert typed.status_code == 400 and "must be a string" in typed.json()["error"]


def test_a_grep_that_runs_too_long_is_stopped(client, monkeypatch):
    monkeypatch.setattr(web_app, "GREP_TIMEOUT", 0.0)
    response = client.get("/api/vocab", params={"ref": "en@1", "grep": "(a|aa)+$"})
    assert response.status_code == 400 and "took longer than" in response.json()["error"]


def test_an_internal_failure_is_a_json_500_without_traceback(db):
    def broken(store, params):
        raise RuntimeError("secret detail")

    app = create_app(db)
    app.router.routes[0].endpoint = app.router.routes[0].endpoint  # the route table is built; patch the handler
    for route in app.router.routes:
        if getattr(route, "path", "") == "/api/versions":
            route.app = web_app.api_route(app.state.store, "versions", (), broken)
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as c:
        response = c.get("/api/versions")
    assert response.status_code == 500
    assert response.json()["error"].startswith("internal error") and "secret" not in response.text
    assert "Traceback" not in response.text


def test_host_header_and_security_headers(db, client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    for host in ("localhost:8765", "127.0.0.1", "[::1]:8765"):
        assert client.get("/api/versions", headers={"host": host}).status_code == 200
    for host in ("evil.example:8765", "evil.example", "127.0.0.1.evil.example", "", "127.0.0.1:8765@evil.com",
                 "[::1].evil.com", "[::1]:80.evil.com", "localhost:80:80", "127.0.0.1 evil.com"):
        response = client.get("/api/versions", headers={"host": host})
        assert response.status_code == 400 and "not to Host" in response.json()["error"]
    with TestClient(create_app(db, allowed_hosts=["tok.lan"]), base_url="http://tok.lan:80") as other:
        assert other.get("/api/versions").status_code == 200


def test_pages_and_static_files_are_served(client):
    for path in ("/", "/version?ref=en@1", "/playground", "/diff?a=en@1&b=en@2", "/token?ref=en@1&id=300",
                 "/corpora", "/corpus?name=books"):
        response = client.get(path)
        assert response.status_code == 200 and "<script src=\"/static/" in response.text
        assert "http://" not in response.text and "https://" not in response.text  # nothing from the network
    for name in ("app.css", "common.js", "versions.js", "playground.js", "version.js", "diff.js", "chart.js",
                 "token.js", "corpora.js", "corpus.js", "notfound.js"):
        response = client.get(f"/static/{name}")
        assert response.status_code == 200, name
        code = response.text.replace('"http://www.w3.org/2000/svg"', "").replace(  # the SVG namespace, not a fetch
            "'http://www.w3.org/2000/svg'", "")
        assert "innerHTML" not in code and "outerHTML" not in code and "insertAdjacentHTML" not in code, name
        assert "http://" not in code and "https://" not in code and "eval(" not in code, name


def test_unknown_pages_are_an_html_404_and_the_api_stays_json(client):
    page = client.get("/no/such/page")
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "<h1>Not found</h1>" in page.text and "content-security-policy" in page.headers
    assert client.get("/api/nothing").json()["status"] == 404
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"


@pytest.mark.parametrize("order", ["id", "rank", "newest", "longest"])
def test_vocab_pages_are_the_cli_order_and_start(db, client, order):
    """A page of tokens is ``vocab --order --start --limit --json``, which is the whole
    list sorted (here, independently) and sliced."""
    whole = cli_json(db, "vocab", "en@2")
    keys = {"id": lambda t: t["id"], "rank": lambda t: (t["rank"] is None, t["rank"] or 0, t["id"]),
            "newest": lambda t: (t["rank"] is None, -(t["rank"] or 0), t["id"]),
            "longest": lambda t: (-t["bytes"], t["id"])}
    ranked = sorted(whole, key=keys[order])
    first = ok(client, "/api/vocab", ref="en@2", order=order, start="0", limit="30")
    assert first == ranked[:30] == cli_json(db, "vocab", "en@2", "--order", order, "--limit", "30")
    later = ok(client, "/api/vocab", ref="en@2", order=order, start="420")  # 100 unless told
    assert later == ranked[420:520] == cli_json(db, "vocab", "en@2", "--order", order, "--start", "420",
                                                "--limit", "100")
    found = sorted(cli_json(db, "vocab", "en@2", "--grep", "^ [a-z]"), key=keys[order])
    assert ok(client, "/api/vocab", ref="en@2", order=order, grep="^ [a-z]", start="5", limit="10") == found[5:15] \
        == cli_json(db, "vocab", "en@2", "--grep", "^ [a-z]", "--order", order, "--start", "5", "--limit", "10")
    prefixed = sorted(cli_json(db, "vocab", "en@2", "--prefix", " th"), key=keys[order])
    assert ok(client, "/api/vocab", ref="en@2", order=order, prefix=" th") == prefixed[:100]


def test_vocab_page_mistakes(db, client):
    bad = client.get("/api/vocab", params={"ref": "en@1", "order": "size"})
    assert bad.status_code == 400 and "'order' is one of id, rank, newest, longest" in bad.json()["error"]
    both = client.get("/api/vocab", params={"ref": "en@1", "order": "id", "longest": "5"})
    assert both.status_code == 400 and "order=longest" in both.json()["error"]
    result = CliRunner().invoke(cli, ["--db", db, "vocab", "en@1", "--order", "id", "--longest", "5"])
    assert result.exit_code == 2 and "--order longest" in result.stderr


def test_diff_pages_are_slices_of_the_cli_diff(db, client):
    whole = cli_json(db, "diff", "en@1", "xss@1")
    page = ok(client, "/api/diff", a="en@1", b="xss@1", start="10", limit="25")
    lists = ("changed_ids", "only_a", "only_b")
    assert page["counts"] == {k: len(whole[k]) for k in lists} and page["start"] == 10 and page["limit"] == 25
    assert {k: page[k] for k in lists} == {k: whole[k][10:35] for k in lists}
    assert {k: v for k, v in page.items() if k not in (*lists, "counts", "start", "limit")} == \
        {k: v for k, v in whole.items() if k not in lists}


def test_curve_without_per_rank_lists_is_small(db, client):
    full = ok(client, "/api/curve", ref="en@2", points="60")
    drawn = ok(client, "/api/curve", ref="en@2", points="60", per_rank="0")
    assert drawn == {k: v for k, v in full.items() if k not in ("merge_counts", "merge_uses")}
    assert len(full["merge_counts"]) == 450 - 256
    assert ok(client, "/api/curve", ref="en@2", points="60", per_rank="1") == full
    assert len(client.get("/api/curve", params={"ref": "en@2", "points": "60", "per_rank": "0"}).content) < 6_000


@pytest.mark.parametrize("ref", ["en@1", "xss@1"])
def test_compact_encoding_is_the_cli_tokens(db, client, ref):
    sample = f"I am Dracula; {XSS} naïve ’x’ 東京\n\t<|endoftext|> 42"
    expected = cli_json(db, "encode", ref, sample, "--tokens")
    got = client.post("/api/encode", json={"ref": ref, "text": sample, "compact": "1"}).json()
    assert got["ids"] == [t["id"] for t in expected] and got["texts"] == [t["token"] for t in expected]
    full = client.post("/api/encode", json={"ref": ref, "text": sample}).json()
    assert {k: v for k, v in got.items() if k != "texts"} == {k: v for k, v in full.items() if k != "tokens"}


def test_the_server_never_writes(db, client):
    store = client.app.state.store if hasattr(client.app, "state") else None
    assert store is not None and store.read_only
    before = cli_json(db, "versions")
    with pytest.raises(ReadOnlyError, match="read-only"):
        store.set_alias("en@2", "prod")
    with pytest.raises(ReadOnlyError):
        store.train("en", corpus="books", vocab_size=500)
    with pytest.raises(bpestore.DatabaseError):  # the database refuses too
        with store.reading() as tx:
            tx.run("DELETE FROM aliases", {})
    assert cli_json(db, "versions") == before


def test_read_only_store_refuses_writes_at_the_database(db_url):
    with bpestore.open(db_url) as store:
        store.ingest("c", [str(bpestore.sample_path())], workers=1)
    with bpestore.open(db_url, read_only=True) as ro:
        assert [c.name for c in ro.corpora()] == ["c"]
        with pytest.raises(ReadOnlyError):
            ro.ingest("d", [str(bpestore.sample_path())])
        with pytest.raises(SQLAlchemyError), ro.engine.connect() as conn:  # the database itself refuses
            conn.execute(text("DELETE FROM generations"))
            conn.commit()
    with bpestore.open(db_url) as store:
        assert store.corpus("c").n_sources == 1


def test_read_only_needs_an_existing_store(tmp_path):
    with pytest.raises(bpestore.NotFoundError, match="no database"):
        bpestore.open(tmp_path / "absent.db", read_only=True)
    assert not (tmp_path / "absent.db").exists()


def test_progress_while_training_reads_the_checkpointed_rows(db_url, tmp_path):
    """A training run paused (by its progress callback) after some checkpoints: the
    API reports what the merge rows hold, and the final merges start with them."""
    with bpestore.open(db_url) as store:
        store.ingest("books", [str(bpestore.sample_path())], workers=1)
    reached, release = threading.Event(), threading.Event()

    def progress(p):
        if p.done == 45:
            reached.set()
            release.wait(60)

    def run():
        with bpestore.open(db_url) as store:
            store.train("en", corpus="books", merges=120, checkpoint_every=10, progress=progress)

    trainer = threading.Thread(target=run)
    trainer.start()
    try:
        assert reached.wait(60)
        with TestClient(create_app(db_url), base_url="http://127.0.0.1") as c:
            # The checkpoints are written by a thread of their own: the fourth (merges
            # 31-40, handed over before merge 45) is written while the loop is paused.
            deadline = time.monotonic() + 60
            while (info := ok(c, "/api/progress", ref="en@1", last="4"))["merges"] < 40 and \
                    time.monotonic() < deadline:
                time.sleep(0.01)
            training = ok(c, "/api/progress")
            listed = ok(c, "/api/versions")
    finally:
        release.set()
        trainer.join()
    assert info["status"] == "training" and 40 <= info["merges"] <= 45 and info["target_merges"] == 120
    assert info["running"] is True  # its trainer holds the version's training lock
    assert info["fraction"] == info["merges"] / 120
    assert training == [info] or [t["ref"] for t in training] == ["en@1"]
    assert listed[0]["status"] == "training"
    with bpestore.open(db_url) as store:
        final = [m.to_dict() for m in store.merges("en@1")]
    assert len(final) == 120 and info["last_merges"] == final[info["merges"] - 4:info["merges"]]


def test_serve_mistakes_are_one_error_line(tmp_path, monkeypatch):
    """`bpestore serve`: a missing database, a port in use, a bad port: one Error: line, nothing created."""
    import socket

    from .conftest import assert_error

    runner = CliRunner()
    missing = tmp_path / "absent.db"
    assert_error(runner.invoke(cli, ["--db", str(missing), "serve"]), "no database at")
    assert not missing.exists()
    db = tmp_path / "ok.db"
    bpestore.open(db).close()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert_error(runner.invoke(cli, ["--db", str(db), "serve", "--port", str(port)]), "cannot listen on")
    result = runner.invoke(cli, ["--db", str(db), "serve", "--port", "70000"])
    assert result.exit_code == 2 and "--port" in result.stderr


def test_concurrent_requests_share_the_tokenizer_cache_safely(db, monkeypatch):
    """Many threads encoding with four versions through a cache of two (evicting all the
    time) get exactly the sequential answers."""
    from concurrent.futures import ThreadPoolExecutor

    from bpestore.store.store import TokenizerCache

    monkeypatch.setattr(Store, "tokenizer_cache", TokenizerCache(size=2))
    app = create_app(db)
    refs = ["en@1", "en@2", "xss@1", "en@prod"]
    texts = [f"Dracula {i} <script>\"{i}\" welcome, Mr. Harker" * (1 + i % 5) for i in range(12)]
    with TestClient(app, base_url="http://127.0.0.1") as c:
        expected = {(r, t): c.post("/api/encode", json={"ref": r, "text": t}).json() for r in refs for t in texts}
        jobs = [(r, t) for _ in range(3) for r in refs for t in texts]
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda job: c.post("/api/encode", json={"ref": job[0], "text": job[1]}).json(), jobs))
    assert got == [expected[job] for job in jobs]


@pytest.mark.parametrize("a, b", [("en@1", "en@2"), ("en@1", "xss@1"), ("xss@1", "en@2")])
def test_diff_view_is_every_section_of_the_cli_diff(db, client, a, b):
    """/api/diff_view, whole (limit 1000): the CLI's diff figures; the merges only in each
    (their byte pairs not merged by the other, from the CLI's merges); changed ids with
    both sides' tokens (the CLI's vocab); the tokens only in each, by bytes (the CLI's,
    sorted) and by rank; a search."""
    d = cli_json(db, "diff", a, b)
    got = ok(client, "/api/diff_view", a=a, b=b, limit="1000", order="bytes")
    assert (got["vocab_size"], got["merges"], got["shared_merges"], got["spec_changes"]) == \
        (d["vocab_size"], d["merges"], d["shared_merges"], d["spec_changes"])
    sections = got["sections"]
    d["only_a"], d["only_b"] = sorted(d["only_a"]), sorted(d["only_b"])  # the CLI lists them in merge order
    assert [t["token"] for t in sections["only_a"]["items"]] == d["only_a"]
    assert [t["token"] for t in sections["only_b"]["items"]] == d["only_b"]
    assert [c["id"] for c in sections["changed_ids"]["items"]] == d["changed_ids"]
    vocab = {ref: {t["id"]: t["token"] for t in cli_json(db, "vocab", ref)} for ref in (a, b)}
    assert all((c["a"], c["b"]) == (vocab[a][c["id"]], vocab[b][c["id"]]) for c in sections["changed_ids"]["items"])
    merges = {ref: cli_json(db, "merges", ref) for ref in (a, b)}
    pairs = {ref: {tuple(m["pair"]) for m in merges[ref]} for ref in (a, b)}
    for name, ref, other in (("new_merges", b, a), ("removed_merges", a, b)):
        expected = [m for m in merges[ref] if tuple(m["pair"]) not in pairs[other]]
        assert sections[name]["items"] == expected and sections[name]["total"] == len(expected), name
    first = {}
    for m in merges[a]:
        first.setdefault(m["token"], m["rank"])
    by_rank = ok(client, "/api/diff_view", a=a, b=b, limit="1000", section="only_a")["sections"]
    assert list(by_rank) == ["only_a"]
    ranks = [t["rank"] for t in by_rank["only_a"]["items"]]
    assert ranks == [first.get(t["id"]) for t in by_rank["only_a"]["items"]]
    assert ranks == sorted(ranks, key=lambda r: (r is None, r or 0))
    found = ok(client, "/api/diff_view", a=a, b=b, section="only_a", q="TH", order="bytes")["sections"]["only_a"]
    assert [t["token"] for t in found["items"]] == [t for t in d["only_a"] if "th" in t.casefold()][:100]
    page = ok(client, "/api/diff_view", a=a, b=b, section="only_a", order="bytes", limit="5", at_only_a="3")
    assert [t["token"] for t in page["sections"]["only_a"]["items"]] == d["only_a"][3:8]
    for bad in ({"order": "sideways"}, {"section": "nope"}, {"limit": "0"}, {"at_only_a": "-1"}):
        assert client.get("/api/diff_view", params={"a": a, "b": b, **bad}).status_code == 400, bad


def test_the_default_evaluation_text_is_held_out(db, client):
    """Without a text, stats are those of the held-out passage, which the packaged
    training sample (Dracula) does not hold."""
    import lzma

    got = ok(client, "/api/stats", ref=["en@1", "en@2"])
    assert got == cli_json(db, "stats", "en@1", "en@2", "--file", str(HELD_OUT))
    sample = lzma.open(bpestore.sample_path(), "rt", encoding="utf-8").read()
    text = HELD_OUT.read_text(encoding="utf-8")
    assert len(text) > 2000 and not any(len(p) > 20 and p in sample for p in text.replace("\n", " ").split(". "))


def test_a_corpus_as_evaluation_set(db, client):
    """``corpus``: the score card's rows from Store.corpus_stats (the corpus-statistics
    work); refused by name while the store has no such method."""
    response = client.get("/api/stats", params={"ref": ["en@1", "en@2"], "corpus": "books@1"})
    if not hasattr(Store, "corpus_stats"):
        assert response.status_code == 501 and "corpus_stats" in response.json()["error"]
        return
    with bpestore.open(db, read_only=True) as store:
        expected = [s.to_dict() for s in store.corpus_stats(["en@1", "en@2"], ["books@1"])]
    assert response.status_code == 200
    assert [(r["ref"], r["tokens"], r["bytes_per_token"]) for r in response.json()] == \
        [(e["ref"], e["tokens"], e["bytes_per_token"]) for e in expected]


def kill_a_trainer(db: str, corpus: str, after: int) -> None:
    """Train dead@1 on ``corpus`` in another process that dies (no clean-up) after ``after`` merges."""
    import subprocess
    import sys

    script = ("import os, sys, bpestore\n"
              "def progress(p):\n"
              f"    if p.done >= {after}: os._exit(3)\n"
              "with bpestore.open(sys.argv[1]) as store:\n"
              f"    store.train('dead', corpus={corpus!r}, merges=400, checkpoint_every=10, progress=progress)\n")
    assert subprocess.run([sys.executable, "-c", script, db], timeout=120).returncode == 3


def test_a_stopped_trainer_is_known_at_once(db_url, tmp_path):
    """A trainer killed after some checkpoints leaves its version "training"; its progress
    says at once that no run holds it (``running`` false: its training lock is free),
    asked without taking the lock (a run started then is not refused)."""
    with bpestore.open(db_url) as store:
        store.ingest("books", [str(bpestore.sample_path())], workers=1)
    kill_a_trainer(db_url, "books", 40)
    with TestClient(create_app(db_url), base_url="http://127.0.0.1") as c:
        info = ok(c, "/api/progress", ref="dead@1", last="0")
        assert info["status"] == "training" and info["running"] is False
        assert ok(c, "/api/progress", ref="dead@1", last="0")["running"] is False  # asking took nothing
        with bpestore.open(db_url) as store:  # the run the page tells of resumes it
            store.resume("dead@1")
        assert ok(c, "/api/progress", ref="dead@1")["running"] is None  # complete


def test_held_out_answers_outlive_the_server(db, tmp_path, monkeypatch):
    """A complete version's curve and score card on the held-out text, and the first page
    of its tokens in an order, are kept in files: a server started afterwards answers them
    without loading a tokenizer or the whole vocabulary (the first visit of a version
    page waits for neither), the same as the CLI's."""
    monkeypatch.setenv("BPESTORE_WEB_CACHE", str(tmp_path / "kept"))
    monkeypatch.setattr(web_app, "RESULTS", web_app.Results())
    monkeypatch.setattr(web_app, "_whole_vocab", {})
    with TestClient(create_app(db), base_url="http://127.0.0.1") as c:
        ok(c, "/api/curve", ref="en@1", points="5")
        ok(c, "/api/stats", ref=["en@1", "en@2"])
        ok(c, "/api/vocab", ref="en@2", order="rank", start="0", limit="30")  # a version page's first list
    assert len(list((tmp_path / "kept").iterdir())) == 3
    monkeypatch.setattr(web_app, "RESULTS", web_app.Results())  # a new server's memory

    def refused(*args, **kwargs):
        raise AssertionError("computed again")
    with TestClient(create_app(db), base_url="http://127.0.0.1") as c:
        monkeypatch.setattr(c.app.state.store, "chart", refused)
        monkeypatch.setattr(c.app.state.store, "stats", refused)
        monkeypatch.setattr(c.app.state.store, "vocab", refused)
        curve = ok(c, "/api/curve", ref="en@1", points="5")
        stats = ok(c, "/api/stats", ref=["en@1", "en@2"])
        tokens = ok(c, "/api/vocab", ref="en@2", order="rank", start="0", limit="30")
    assert curve == cli_json(db, "plot", "en@1", "--file", str(HELD_OUT), "--points", "5")[0]
    assert stats == cli_json(db, "stats", "en@1", "en@2", "--file", str(HELD_OUT))
    assert tokens == cli_json(db, "vocab", "en@2", "--order", "rank", "--limit", "30")
