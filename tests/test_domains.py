"""Registered domains from the Public Suffix List (FRONTIER_QUEUE_BY = "domain")."""

from __future__ import annotations

import pytest

from extensions.frontier.domains import registered_domain
from extensions.frontier.groups import group_for


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("www.example.com", "example.com"),
        ("a.b.example.com", "example.com"),
        ("example.com", "example.com"),
        # a suffix of the list's ICANN part, beyond any short list of second levels
        ("shop.example.co.uk", "example.co.uk"),
        ("a.b.c.example.kawasaki.jp", "c.example.kawasaki.jp"),
        ("www.example.com.br", "example.com.br"),
        # the list's private suffixes are registries: each user's site is its own
        ("alice.github.io", "alice.github.io"),
        ("www.alice.github.io", "alice.github.io"),
        ("x.y.blogspot.com", "y.blogspot.com"),
        # IDN, as a URL carries it
        ("www.xn--bcher-kva.de", "xn--bcher-kva.de"),
        # a name under no listed suffix: the list's default rule (the last label)
        ("a.b.intranet", "b.intranet"),
        # the fully-qualified form is the same site
        ("www.example.com.", "example.com"),
        # its own domain: an address, a suffix itself, one label, what the list cannot read
        ("10.0.0.7", "10.0.0.7"),
        ("2001:db8::1", "2001:db8::1"),
        ("::1", "::1"),
        ("co.uk", "co.uk"),
        ("github.io", "github.io"),
        ("localhost", "localhost"),
        ("a..b", "a..b"),
        ("", ""),
    ],
)
def test_a_hosts_registered_domain_is_the_public_suffix_lists(host, domain):
    assert registered_domain(host) == domain


def test_hosts_of_one_registered_domain_share_a_queue_and_private_suffixes_do_not():
    by_domain = {
        group_for(url, by="domain")
        for url in (
            "http://a.example.co.uk/",
            "https://B.Example.co.uk:8443/x",
            "http://example.co.uk",
        )
    }
    assert by_domain == {"example.co.uk"}
    assert group_for("http://alice.github.io/", by="domain") != group_for(
        "http://bob.github.io/", by="domain"
    )
    assert group_for("http://[2001:db8::1]:8080/", by="domain") == "2001:db8::1"
    # a hostile name is still one bounded group, safe in a key
    assert group_for("http://" + "a." * 200 + "example.com/", by="domain") == "example.com"
    assert group_for("http://" + "a" * 300 + ".com/", by="domain") == "a" * 255
