"""Web Bot Auth: every request a node sends is signed (RFC 9421, Ed25519), as a
site verifying it with another implementation (http-message-signatures)
accepts, in the working group's form and the legacy one, after a redirect and a
retry too; a replayed nonce is refused; keys rotate; bad keys and URLs are
refused at start-up, naming the setting."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import os
import threading
import time
from dataclasses import dataclass

import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from http_message_signatures import HTTPMessageVerifier, HTTPSignatureKeyResolver, algorithms
from scrapy.settings import Settings

from extensions import config
from extensions.botauth import BotSigner, load_private_key, signer_from_settings, thumbprint
from extensions.exceptions import ConfigError
from servers import services
from tests.conftest import ROOT, read_items, scrapy
from tests.helpers import SECRET, proxied, with_credentials
from tests.test_own_project import readme_settings

pytestmark = pytest.mark.spawns  # the key comes from `scrapy botauth keygen`

AGENT = "https://bots.example/.well-known/http-message-signatures-directory"


@dataclass
class Message:
    method: str
    url: str
    headers: dict


class Directory(HTTPSignatureKeyResolver):
    """A verifying site's view of the key directory, and the nonces it has seen."""

    def __init__(self, document: dict):
        self.keys = {}
        self.nonces: set[str] = set()
        self.used: list[str] = []  # the keyid of each signature it accepted
        for jwk in document["keys"]:
            raw = base64.urlsafe_b64decode(jwk["x"] + "==")
            self.keys[jwk["kid"]] = Ed25519PublicKey.from_public_bytes(raw)

    def resolve_public_key(self, key_id: str):
        return self.keys.get(key_id)


COVERED = {"wg": '"signature-agent";key="sig1"', "legacy": "signature-agent"}
AGENT_FIELD = {"wg": f'sig1="{AGENT}"', "legacy": f'"{AGENT}"'}


def verified(directory: Directory, method: str, url: str, headers, form: str = "wg") -> bool:
    """As a site checks it: the signature, its coverage, its age and, in the
    working group's form, a nonce never seen before."""
    verifier = HTTPMessageVerifier(signature_algorithm=algorithms.ED25519, key_resolver=directory)
    message = Message(method, url, {k: v for k, v in headers.items()})
    try:
        [result] = verifier.verify(message, expect_tag="web-bot-auth",
                                   require_components=("@authority", COVERED[form]),
                                   max_age=datetime.timedelta(seconds=120))  # fmt: skip
    except Exception:
        return False
    if form == "wg":
        if not result.nonce or result.nonce in directory.nonces:
            return False  # a replay
        directory.nonces.add(result.nonce)
    directory.used.append(result.parameters["keyid"])
    return headers.get("Signature-Agent") == AGENT_FIELD[form] and bool(result)


@pytest.mark.parametrize("form", ["wg", "legacy"])
def test_a_signature_is_what_another_implementation_verifies(key_files, form):
    path, directory = key_files
    key = load_private_key(str(path))
    assert list(directory.keys) == [thumbprint(key.public_key())]
    signer = BotSigner(key, AGENT, 60, form)
    for url in ("https://a.test/x?y=1", "http://A.test:8080/", "https://[::1]:443/p"):
        headers = signer.headers(url)
        assert verified(directory, "GET", url, headers, form), (url, headers)
    headers = signer.headers("https://a.test/")
    assert not verified(directory, "GET", "https://b.test/", headers, form)  # another site
    stale = signer.headers("https://a.test/", now=1_000_000_000)
    assert not verified(directory, "GET", "https://a.test/", stale, form)  # expired
    other = "legacy" if form == "wg" else "wg"
    assert not verified(directory, "GET", "https://a.test/", signer.headers("https://a.test/"),
                        other)  # fmt: skip
    if form == "wg":  # a nonce once: the same headers again are a replay
        again = signer.headers("https://a.test/")
        assert verified(directory, "GET", "https://a.test/", again)
        assert not verified(directory, "GET", "https://a.test/", again)
        assert "nonce=" not in BotSigner(key, AGENT, 60, "legacy").headers("https://a.test/")[
            "Signature-Input"]  # fmt: skip


def test_a_new_key_beside_the_old_signs_from_its_start_and_the_directory_lists_both(
    tmp_path, key_files
):
    """``scrapy botauth keygen`` in a project that has a key: the new one waits a
    day by default (for verifiers to read the directory), --start-in 0 not."""
    old, _ = key_files
    project = tmp_path / "project"
    made = scrapy("startproject", "rotating", str(project))
    assert made.returncode == 0, made.stderr
    settings = project / "rotating" / "settings.py"
    settings.write_text(settings.read_text() + "\n" + readme_settings()
                        + f"\nBOT_AUTH_KEY = {str(old)!r}\n")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the stack, as the README installs it
    # a test before this one in the worker may have called get_project_settings(),
    # which names the bundled project's settings in os.environ: the project's own here
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    later = scrapy("botauth", "keygen", str(tmp_path / "later.pem"), cwd=project, env=env)
    assert later.returncode == 0, later.stderr
    assert "(2 keys)" in later.stdout and "BOT_AUTH_KEYS = [" in later.stdout, later.stdout
    now = scrapy("botauth", "keygen", str(tmp_path / "now.pem"), "--start-in", "0", cwd=project,
                 env=env)  # fmt: skip
    assert now.returncode == 0, now.stderr
    document = json.loads((tmp_path / "now.pem.directory.json").read_text())
    directory = Directory(document)
    keyids = {name: thumbprint(load_private_key(str(tmp_path / name)).public_key())
              for name in ("bot.pem", "later.pem", "now.pem")}  # fmt: skip
    assert set(directory.keys) == {keyids["bot.pem"], keyids["now.pem"]}

    paths = [str(old), str(tmp_path / "later.pem"), str(tmp_path / "now.pem")]
    signer = signer_from_settings(Settings({"BOT_AUTH_KEYS": paths,
                                            "BOT_AUTH_SIGNATURE_AGENT": AGENT}))  # fmt: skip
    assert signer is not None
    assert verified(directory, "GET", "https://a.test/", signer.headers("https://a.test/"))
    assert directory.used == [keyids["now.pem"]]  # the newest valid now
    in_two_days = time.time() + 2 * 86400
    assert signer.signing_key(in_two_days).keyid == keyids["later.pem"]
    # a key that cannot be read is named; keygen beside it refuses too
    (tmp_path / "junk.pem").write_text("no key")
    with pytest.raises(ConfigError, match=r"BOT_AUTH_KEYS .*junk\.pem"):
        signer_from_settings(Settings({"BOT_AUTH_KEYS": [*paths, str(tmp_path / "junk.pem")],
                                       "BOT_AUTH_SIGNATURE_AGENT": AGENT}))  # fmt: skip
    junk = str(tmp_path / "junk.pem")
    settings.write_text(settings.read_text() + f"BOT_AUTH_KEYS = [{junk!r}]\n")
    refused = scrapy("botauth", "keygen", str(tmp_path / "more.pem"), cwd=project, env=env)
    assert refused.returncode == 1 and "BOT_AUTH_KEYS" in refused.stderr, refused.stderr
    assert not (tmp_path / "more.pem").exists()


def test_bad_keys_and_directory_urls_are_refused_naming_the_setting(tmp_path, key_files):
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
