"""The link path (``extensions/follow.py``): Scrapy's extractor's links, less those
the node sent, at a cost per new link."""

import pytest
from scrapy import Request, Spider
from scrapy.http import HtmlResponse, TextResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.settings import Settings
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.request import RequestFingerprinter
from scrapy.utils.test import get_crawler

from extensions import defaults
from extensions.follow import LinkFollower, fast_path_for
from extensions.frontier.admission import Admission
from extensions.frontier.sent import SentFingerprints
from extensions.urlpolicy import UrlPolicy
from servers.nginx import PYTHON_DOCS

EXTRACTORS = {
    "every link": LinkExtractor(),
    "allow, deny, extensions": LinkExtractor(
        allow=r"/library/", deny=r"genindex", deny_extensions=["txt", "tar.gz"]
    ),
    "restrict_xpaths": LinkExtractor(restrict_xpaths="(//a|//area)[position() <= 50]"),
    "restrict_css": LinkExtractor(restrict_css=["div.body", "div.sphinxsidebar"]),
    "restrict_text": LinkExtractor(restrict_text="[Mm]odule"),
    "canonicalize": LinkExtractor(canonicalize=True),
    "domains": LinkExtractor(allow_domains=["docs.python.org", "example.com"]),
}

TRICKY = """<html><head><base href="{base}"></head><body>
<a href="../up.html">up</a> <a href="same.html#x">same, a fragment</a>
<a href="same.html#y">same, another</a> <a href="?q=1">a query</a> <a href="#top">top</a>
<a href="  #spaced ">spaced</a> <a href="">empty</a> <a href=";p=1">params</a>
<a href="//other.example/x">scheme-relative</a> <a href="mailto:a@b.c">mail</a>
<a href="javascript:void(0)">js</a> <a href="caf\u00e9/men\u00fc?s=\u00fc">non-ASCII</a>
<a href="a b.html">a space</a> <a href="FILE.PDF">a document</a>
<a href="http://[::1">bogus</a> <a rel="nofollow" href="/n">nofollow</a> <a>no href</a>
<map><area href="/area.html"></map> <a href="/dup">first text</a> <a href="/dup">second</a>
</body></html>"""


def project_defaults() -> dict:
    return {name: getattr(defaults, name) for name in dir(defaults) if name.isupper()}


def html(url: str, body: str | bytes, encoding: str = "utf-8") -> HtmlResponse:
    return HtmlResponse(url, body=body, encoding=encoding, request=Request(url))


def shapes(links):
    return [(link.url, link.text, link.nofollow) for link in links]


def follower(extractor, sent=None, **kwargs) -> LinkFollower:
    return LinkFollower(extractor, sent, resolved_cache=50_000, **kwargs)


@pytest.mark.skipif(not PYTHON_DOCS.is_dir(), reason="python3-doc missing: make system-tools")
@pytest.mark.parametrize("name", EXTRACTORS)
def test_on_real_pages_the_path_finds_what_scrapys_extractor_finds(name):
    extractor = EXTRACTORS[name]
    path = follower(extractor, SentFingerprints(1000))  # nothing sent: every link is new
    assert path.fast
    pages = sorted(PYTHON_DOCS.rglob("*.html"))[::8]
    for page in pages:
        body = page.read_bytes()
        for host in ("http://127.0.0.1:8080/", "http://docs.example.com/"):
            url = host + str(page.relative_to(PYTHON_DOCS))
            assert shapes(path.new_links(html(url, body))) == shapes(
                extractor.extract_links(html(url, body))
            ), url


@pytest.mark.parametrize("encoding", ["utf-8", "cp1252"])
def test_references_resolve_per_page_as_scrapy_resolves_them(encoding):
    extractor = LinkExtractor()
    path = follower(extractor)
    # pages of one directory, and of others, met in turn: what one resolved is not
    # another's answer unless it resolves the same there
    bases = ["http://h.test/a/b/page?x=1", "http://h.test/a/b/other", "http://h.test/a/c/",
             "http://h.test/a/b/page?x=2", "http://h.test", "https://h.test/a/b/p?x=1"]  # fmt: skip
    for base in bases * 2:
        body = TRICKY.format(base=base).encode(encoding, "replace")
        expected = shapes(extractor.extract_links(html(base + "#f", body, encoding)))
        assert shapes(path.new_links(html(base + "#f", body, encoding))) == expected


def test_a_link_the_node_sent_is_skipped_for_its_crawl_only():
    sent, stats = SentFingerprints(100), MemoryStatsCollector(get_crawler(Spider))
    path = follower(LinkExtractor(), sent, stats=stats)
    body = b'<a href="x">x</a> <a href="x#part">part</a> <a href="y">y</a>'
    page = html("http://h.test/a/", body)
    sent.fragments_matter = False  # as the node sets it for Scrapy's fingerprint
    sent.add_url("", "http://h.test/a/x")
    assert [link.url for link in path.new_links(page)] == ["http://h.test/a/y"]
    assert stats.get_value("links/known") == 2 and stats.get_value("links/new") == 1
    # another crawl sent nothing
    assert len(path.new_links(page, crawl="other")) == 3
    other = html("http://h.test/a/", page.body)
    other.meta["crawl_id"] = "other"
    assert len(path.new_links(other)) == 3
    # a fingerprint that reads fragments: x#part is not x
    sent.fragments_matter = True
    assert [link.url for link in path.new_links(page)] == ["http://h.test/a/x#part",
                                                           "http://h.test/a/y"]  # fmt: skip


def test_with_host_ranks_links_to_other_hosts_are_never_skipped():
    sent = SentFingerprints(100)
    sent.add_url("", "http://h.test/mine")
    sent.add_url("", "http://other.test/theirs")
    page = html("http://h.test/", b'<a href="/mine">m</a> <a href="http://other.test/theirs">t</a>')
    assert follower(LinkExtractor(), sent).new_links(page) == []
    # the link graph counts links between hosts: they go on to it
    ranked = follower(LinkExtractor(), sent, other_hosts_known=False)
    assert [link.url for link in ranked.new_links(page)] == ["http://other.test/theirs"]


def test_an_extractor_the_fast_path_does_not_reproduce_is_run_and_filtered():
    sent = SentFingerprints(100)
    sent.add_url("", "http://h.test/img.png")
    for extractor in (LinkExtractor(tags=("img",), attrs=("src",), deny_extensions=[]),
                      LinkExtractor(process_value=lambda value: value + "?v=1"),
                      LinkExtractor(strip=False)):  # fmt: skip
        assert not fast_path_for(extractor)
    page = html("http://h.test/", b'<img src="img.png"> <img src="new.png">')
    images = LinkExtractor(tags=("img",), attrs=("src",), deny_extensions=[])
    assert [link.url for link in follower(images, sent).new_links(page)] == [
        "http://h.test/new.png"
    ]
    # not HTML: Scrapy's extractor reads it, as it would
    text = TextResponse("http://h.test/t", body=b"<a href='/x'>x</a>", encoding="utf-8")
    assert shapes(follower(LinkExtractor(), sent).new_links(text)) == shapes(
        LinkExtractor().extract_links(text)
    )


def test_only_what_reached_the_dupefilter_counts_as_sent():
    """A link a middleware dropped before the scheduler (a depth limit, a link
    limit, a trap) is not skipped when another page has it again."""
    settings = Settings(project_defaults())
    sent = SentFingerprints(100)
    sent.fragments_matter = False
    stats = MemoryStatsCollector(get_crawler(Spider))
    admission = Admission(UrlPolicy.from_settings(settings), stats, sent,
                          lambda **letter: None, queue_by="host", max_delay=3600)  # fmt: skip
    path = follower(LinkExtractor(), sent)
    page = html("http://h.test/", b'<a href="/deep">d</a> <a href="/kept#f">k</a>')
    spider, fingerprinter = Spider("s"), RequestFingerprinter()
    links = path.new_links(page)
    # /deep never reaches the scheduler (dropped on the way); /kept does
    admission.admit(page.follow(links[1]), spider, fingerprinter)
    assert [link.url for link in path.new_links(page)] == ["http://h.test/deep"]
    # a request whose fingerprint is its URL as is leaves no mark
    verbatim = Request("http://h.test/raw#a", meta={"verbatim_url": True})
    admission.admit(verbatim, spider, fingerprinter)
    assert not sent.has_url("", "http://h.test/raw")
    sent.clear()  # the crawl is over: the shared dupefilter alone decides
    assert len(path.new_links(page)) == 2


def test_a_crawl_spiders_rules_see_only_the_links_the_node_did_not_send():
    from scrapy.spiders import Rule

    from extensions.frontier.sent import sent_for
    from extensions.spiders import DistributedCrawlSpider

    handed: list[list[str]] = []

    class Rules(DistributedCrawlSpider):
        name = "rules"
        rules = (
            Rule(LinkExtractor(allow=r"/a/"), process_links="seen_links", follow=True),
            Rule(LinkExtractor(allow=r"/b/"), callback="parse_b"),
        )

        def seen_links(self, links):
            handed.append([link.url for link in links])
            return links

        def parse_b(self, response):
            return None

    crawler = get_crawler(Rules, project_defaults())  # as the add-on installs them
    spider = Rules()
    spider._set_crawler(crawler)  # (from_crawler would connect to Redis too)
    sent = sent_for(crawler)
    sent.add_url("", "http://h.test/a/1")
    sent.add_url("", "http://h.test/b/1")
    page = html("http://h.test/", b'<a href="/a/1">1</a><a href="/a/2">2</a>'
                                  b'<a href="/b/1">1</a><a href="/b/2">2</a>')  # fmt: skip
    requests = list(spider._requests_to_follow(page))
    assert [request.url for request in requests] == ["http://h.test/a/2", "http://h.test/b/2"]
    assert requests[1].callback == spider._callback and requests[1].meta["rule"] == 1
    assert handed == [["http://h.test/a/2"]]
