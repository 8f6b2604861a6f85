"""Web Bot Auth: every request a node sends is signed (RFC 9421, Ed25519), as a
site verifying it with another implementation (http-message-signatures)
accepts, after a redirect and a retry too; bad keys and URLs are refused at
start-up, naming the setting."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import threading
import time
from dataclasses import dataclass

import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from http_message_signatures import HTTPMessageVerifier, HTTPSignatureKeyResolver, algorithms

from extensions import config
from extensions.botauth import BotSigner, load_private_key, thumbprint
from extensions.exceptions import ConfigError
from servers import services
from tests.conftest import read_items, scrapy
from tests.helpers import SECRET, proxied, with_credentials

pytestmark = pytest.mark.spawns  # the key comes from `scrapy botauth keygen`

AGENT = "https://bots.example/.well-known/http-message-signatures-directory"


@dataclass
class Message:
    method: str
    url: str
    headers: dict


class Directory(HTTPSignatureKeyResolver):
    def __init__(self, document: dict):
        self.keys = {}
        for jwk in document["keys"]:
            raw = base64.urlsafe_b64decode(jwk["x"] + "==")
            self.keys[jwk["kid"]] = Ed25519PublicKey.from_public_bytes(raw)

    def resolve_public_key(self, key_id: str):
        return self.keys.get(key_id)


def verified(directory: Directory, method: str, url: str, headers) -> bool:
    verifier = HTTPMessageVerifier(signature_algorithm=algorithms.ED25519, key_resolver=directory)
    message = Message(method, url, {k: v for k, v in headers.items()})
    try:
        [result] = verifier.verify(message, expect_tag="web-bot-auth",
                                   require_components=("@authority", "signature-agent"),
                                   max_age=datetime.timedelta(seconds=120))  # fmt: skip
    except Exception:
        return False
    return headers.get("Signature-Agent") == f'"{AGENT}"' and bool(result)


@pytest.fixture
def key_files(tmp_path):
    made = scrapy("botauth", "keygen", str(tmp_path / "bot.pem"))
    assert made.returncode == 0, made.stderr
    document = json.loads((tmp_path / "bot.pem.directory.json").read_text())
    return tmp_path / "bot.pem", Directory(document)


def test_a_signature_is_what_another_implementation_verifies(key_files):
    path, directory = key_files
    key = load_private_key(str(path))
    assert list(directory.keys) == [thumbprint(key.public_key())]
    signer = BotSigner(key, AGENT, 60)
    for url in ("https://a.test/x?y=1", "http://A.test:8080/", "https://[::1]:443/p"):
        headers = signer.headers(url)
        assert verified(directory, "GET", url, headers), (url, headers)
    headers = signer.headers("https://a.test/")
    assert not verified(directory, "GET", "https://b.test/", headers)  # another site
    stale = signer.headers("https://a.test/", now=1_000_000_000)
    assert not verified(directory, "GET", "https://a.test/", stale)  # expired


def test_bad_keys_and_directory_urls_are_refused_naming_the_setting(tmp_path, key_files):
    from scrapy.settings import Settings

    rsa_like = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "ec.pem").write_bytes(rsa_like.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))  # fmt: skip
    (tmp_path / "junk.pem").write_text("not a key")
    good = str(key_files[0])
    cases = [
        ({"BOT_AUTH_KEY": str(tmp_path / "ec.pem"), "BOT_AUTH_SIGNATURE_AGENT": AGENT},
         "BOT_AUTH_KEY", "not an Ed25519 key"),
        ({"BOT_AUTH_KEY": str(tmp_path / "junk.pem"), "BOT_AUTH_SIGNATURE_AGENT": AGENT},
         "BOT_AUTH_KEY", "not a PEM private key"),
        ({"BOT_AUTH_KEY": str(tmp_path / "none.pem"), "BOT_AUTH_SIGNATURE_AGENT": AGENT},
         "BOT_AUTH_KEY", "cannot be read"),
        ({"BOT_AUTH_KEY": good, "BOT_AUTH_SIGNATURE_AGENT": "http://bots.example/d"},
         "BOT_AUTH_SIGNATURE_AGENT", "must be an https:// URL"),
        ({"BOT_AUTH_KEY": good}, "BOT_AUTH_SIGNATURE_AGENT", "must be set with BOT_AUTH_KEY"),
    ]  # fmt: skip
    for settings, name, said in cases:
        with pytest.raises(ConfigError) as raised:
            config.check(Settings(settings))
        [line] = str(raised.value).splitlines()
        assert line.startswith(f"{name} = ") and said in line, line
    config.check(Settings({"BOT_AUTH_KEY": good, "BOT_AUTH_SIGNATURE_AGENT": AGENT}))
    # keygen's directory says the key is valid a year; one about to expire is refused
    published = key_files[0].parent / "bot.pem.directory.json"
    document = json.loads(published.read_text())
    [jwk] = document["keys"]
    assert 364 * 86400 <= jwk["exp"] - jwk["nbf"] <= 366 * 86400
    jwk["exp"] = int(time.time()) + 3600
    published.write_text(json.dumps(document))
    with pytest.raises(ConfigError) as raised:
        config.check(Settings({"BOT_AUTH_KEY": good, "BOT_AUTH_SIGNATURE_AGENT": AGENT}))
    assert "BOT_AUTH_KEY = " in str(raised.value) and "within a day" in str(raised.value)


class VerifyingSite:
    """A site that checks every request's signature: /, two pages, one that
    redirects, one that fails once (retried)."""

    def __init__(self, directory: Directory):
        self.directory = directory
        self.results: list[tuple[str, bool]] = []
        self.failed_once = False
        self.port = services.free_port()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def handle(self, request: web.Request) -> web.Response:
        url = f"http://{request.host}{request.path_qs}"
        self.results.append((request.path, verified(self.directory, request.method, url,
                                                     request.headers)))  # fmt: skip
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        if request.path == "/moved":
            raise web.HTTPFound("/b")
        if request.path == "/flaky" and not self.failed_once:
            self.failed_once = True
            return web.Response(status=503)
        if request.path == "/js/style.css":
            return web.Response(text="h1 { color: red }", content_type="text/css")
        if request.path == "/js/app.js":
            return web.Response(text="document.title = 'ran';", content_type="text/javascript")
        if request.path == "/js/":  # a page a browser renders, with what it loads
            page = (
                "<html><head><link rel='stylesheet' href='/js/style.css'>"
                "<script src='/js/app.js'></script></head><body><h1>Signed</h1></body></html>"
            )
            return web.Response(text=page, content_type="text/html")  # fmt: skip
        links = "<a href='/a'>a</a><a href='/moved'>m</a><a href='/flaky'>f</a>"
        return web.Response(text=f"<html><title>{request.path}</title>{links}</html>",
                            content_type="text/html")  # fmt: skip

    def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        runner = web.AppRunner(app, access_log=None)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(runner.setup(), self.loop).result(10)
        site = web.TCPSite(runner, "127.0.0.1", self.port)
        asyncio.run_coroutine_threadsafe(site.start(), self.loop).result(10)
        self.runner = runner
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def test_every_request_of_a_crawl_carries_a_valid_signature(
    redis_url, redis_client, nodes, key_files, tmp_path
):
    """Through a proxy, as a crawl behind one sends them: the signature is the
    site's, not the proxy's."""
    path, directory = key_files
    site = VerifyingSite(directory)
    url = site.start()
    proxy = services.start_forward_proxy(auth=f"crawler:{SECRET}")
    try:
        redis_client.lpush("site:start_urls", url + "/")
        nodes.start("site", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=2,
                    ROTATING_PROXY_LIST=with_credentials(proxy),
                    BOT_AUTH_KEY=str(path), BOT_AUTH_SIGNATURE_AGENT=AGENT)  # fmt: skip
        assert nodes.wait(120) == [0], nodes.tail()
        through_proxy = {entry["url"].removeprefix(url) for entry in proxied(proxy)}
    finally:
        proxy.stop()
        site.stop()
    assert through_proxy >= {"/", "/a", "/b"}, through_proxy
    paths = [p for p, _ in site.results]
    # robots.txt, the pages, the redirect and its target, the failure and its retry
    for expected in ("/robots.txt", "/", "/a", "/moved", "/b"):
        assert expected in paths, paths
    assert paths.count("/flaky") == 2
    assert all(ok for _, ok in site.results), site.results
    assert nodes.stat(0, "botauth/signed") == len(site.results)
    assert {item["title"] for item in read_items(tmp_path / "items")} >= {"/", "/a", "/b"}


def test_a_rendered_page_and_what_it_loads_are_signed(redis_url, redis_client, nodes, key_files):
    """A render node's browser sends the page's request with the node's signature,
    and signs what the page loads (its stylesheet, its script) for their site."""
    path, directory = key_files
    site = VerifyingSite(directory)
    url = site.start()
    try:
        redis_client.lpush("jsshop:start_urls", url + "/js/")
        nodes.start("jsshop", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=3, RENDER_ENABLED=True,
                    BOT_AUTH_KEY=str(path), BOT_AUTH_SIGNATURE_AGENT=AGENT)  # fmt: skip
        assert nodes.wait(120) == [0], nodes.tail()
    finally:
        site.stop()
    paths = [p for p, _ in site.results]
    for expected in ("/js/", "/js/style.css", "/js/app.js"):
        assert expected in paths, paths
    # (the favicon Chromium may fetch for itself never reaches Playwright's routes:
    # Playwright filters it out, microsoft/playwright#7493)
    assert all(ok for p, ok in site.results if p != "/favicon.ico"), site.results
    assert nodes.stat(0, "playwright/page_count") >= 1


def test_the_console_serves_the_key_directory_to_anyone(start_console, key_files):
    import urllib.error
    import urllib.request

    path, _ = key_files
    console = start_console(BOT_AUTH_KEY=str(path), BOT_AUTH_SIGNATURE_AGENT=AGENT,
                            CONSOLE_USER="ops", CONSOLE_PASSWORD="right-horse")  # fmt: skip
    url = console.url + "/.well-known/http-message-signatures-directory"
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith(
            "application/http-message-signatures-directory+json"
        )
        served = json.load(answer)
    assert served == json.loads((path.parent / "bot.pem.directory.json").read_text())

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    with pytest.raises(urllib.error.HTTPError) as refused:  # the rest still needs a login
        urllib.request.build_opener(NoRedirect).open(console.url + "/", timeout=10)
    assert refused.value.code == 303
