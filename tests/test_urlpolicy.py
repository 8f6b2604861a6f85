"""What a node may fetch: schemes, ports, length, credentials, private networks."""

import pytest
from scrapy.settings import Settings

from extensions.addon import DistributedAddon
from extensions.urlpolicy import UrlPolicy, address_problem, mask_credentials


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("file:///etc/passwd", "scheme"),
        ("file://127.0.0.1/dev/zero", "scheme"),
        ("ftp://example.com/x", "scheme"),
        ("data:text/html,hi", "scheme"),
        ("s3://bucket/key", "scheme"),
        ("http://example.com/" + "a" * 3000, "length"),
        ("http://user:pw@example.com/", "credentials"),
        ("http://example.com:6379/", "port"),
        ("http://10.0.0.8/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "private"),
        ("http://[::1]:8080/", "private"),
        ("http://[::ffff:127.0.0.1]/", "private"),
        ("http://0.0.0.0/", "private"),
    ],
)
def test_refused_urls_say_why(url, kind):
    policy = UrlPolicy(ports=frozenset({80, 443, 8080}), deny_private=True)
    problem = policy.problem(url)
    assert problem is not None and problem[0] == kind, problem


def test_the_public_web_passes_and_defaults_allow_any_port_and_address():
    strict = UrlPolicy(ports=frozenset({80, 443}), deny_private=True)
    assert strict.problem("https://example.com/a?b=1") is None
    assert strict.problem("http://93.184.216.34/") is None
    default = UrlPolicy()
    assert default.problem("http://127.0.0.1:8000/") is None  # the local demo works as is
    assert default.problem("HTTPS://example.com/") is None


def test_private_ranges():
    for address in ("127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.1.1",
                    "::1", "fe80::1", "fc00::1", "224.0.0.1", "100.64.0.1"):  # fmt: skip
        assert address_problem(address), address
    assert address_problem("8.8.8.8") is None
    assert address_problem("example.com") is None  # a name is judged once resolved


def test_credentials_are_masked_wherever_they_appear():
    text = '{"url": "http://admin:s3cret@host/a"} https://u:p@h/ http://plain/'
    masked = mask_credentials(text)
    assert "s3cret" not in masked and "u:p@" not in masked
    assert "http://***@host/a" in masked and "http://plain/" in masked


def test_the_addon_closes_the_doors_a_project_may_reopen():
    settings = Settings()
    DistributedAddon().update_settings(settings)
    assert settings.getbool("REMOTE_CONTROL_ENABLED") is False
    assert not [path for path in settings.getwithbase("EXTENSIONS") if "remote_control" in path]
    assert settings.getint("DOWNLOAD_MAXSIZE") == 32 * 1024 * 1024
    handlers = settings.getdict("DOWNLOAD_HANDLERS")
    assert {scheme: handlers.get(scheme, "on") for scheme in ("file", "ftp", "s3", "data")} == {
        "file": None, "ftp": None, "s3": None, "data": None
    }  # fmt: skip
    assert "http" not in handlers  # Scrapy's own stays
    # HTTPS: Scrapy's HTTP/1.1 handler with certificates verified (extensions/wire/)
    assert handlers["https"] == "extensions.wire.handlers.Http11Handler"
    assert settings.getbool("DOWNLOAD_VERIFY_CERTIFICATES") is True

    reopened = Settings()
    reopened.setdict(
        {"REMOTE_CONTROL_ENABLED": True, "DOWNLOAD_MAXSIZE": 1000,
         "ALLOWED_SCHEMES": ["http", "https", "ftp"]},
        priority="project",
    )  # fmt: skip
    DistributedAddon().update_settings(reopened)
    assert reopened.getbool("REMOTE_CONTROL_ENABLED") is True
    assert [path for path in reopened.getwithbase("EXTENSIONS") if "remote_control" in path]
    assert reopened.getint("DOWNLOAD_MAXSIZE") == 1000
    assert "ftp" not in reopened.getdict("DOWNLOAD_HANDLERS")
    assert UrlPolicy.from_settings(reopened).problem("ftp://example.com/") is None
    assert UrlPolicy.from_settings(Settings()).problem("ftp://example.com/")
