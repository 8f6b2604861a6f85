"""``make bench`` section 25: what being a crawler sites can trust costs.

* CPU per request of signing it (Web Bot Auth: ``extensions/botauth.py``), the
  signature base built and an Ed25519 signature made.
* CPU per page of reading what it says of itself (meta robots, X-Robots-Tag:
  ``spidermiddlewares/robotsmeta.py``, on by default) on Python's HTML
  documentation, real pages nobody here wrote.
"""

from __future__ import annotations

import time

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from scrapy.http import HtmlResponse

from extensions.botauth import BotSigner
from extensions.spidermiddlewares.robotsmeta import header_directives, meta_directives
from servers.nginx import PYTHON_DOCS

AGENT = "https://bots.example/.well-known/http-message-signatures-directory"


def signing_cost(count: int = 20_000) -> float:
    """Microseconds of CPU a request's signature takes."""
    signer = BotSigner(Ed25519PrivateKey.generate(), AGENT, 60)
    urls = [f"https://host{n % 500}.example:8443/page/{n}" for n in range(count)]
    started = time.process_time()
    for url in urls:
        signer.headers(url)
    return (time.process_time() - started) / count * 1e6


def robots_meta_cost() -> dict[str, float]:
    pages = sorted(PYTHON_DOCS.rglob("*.html"))[:1500]
    responses = [HtmlResponse(f"https://docs.example/{p.name}", body=p.read_bytes()) for p in pages]
    if not responses:
        return {}
    started = time.process_time()
    for response in responses:
        header_directives(response.headers.getlist("X-Robots-Tag"), "crawler")
        meta_directives(response, "crawler")
    spent = time.process_time() - started
    return {"pages": len(responses), "us": spent / len(responses) * 1e6}


def measure() -> dict:
    return {"signing_us": signing_cost(), "robots_meta": robots_meta_cost()}


def report(result: dict) -> None:
    print(f"   signing a request (Web Bot Auth, Ed25519): {result['signing_us']:.0f} µs of CPU")
    meta = result["robots_meta"]
    if meta:
        print(f"   reading a page's robots directives: {meta['us']:.1f} µs of CPU per page "
              f"({meta['pages']} pages of Python's documentation)")  # fmt: skip


if __name__ == "__main__":  # this section alone: python -m tools.trust_bench
    report(measure())
