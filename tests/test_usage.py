"""What a site says its content may be used for: Content-Signal and
Content-Usage, in robots.txt and in headers."""

from __future__ import annotations

import pytest

from extensions.usage import PREFERENCES_KEPT, header_usage, preferences, robots_usage

pytestmark = pytest.mark.unit

ROBOTS = b"""# a comment
Content-Usage: train-ai=n

User-Agent: *
Content-Signal: search=yes, ai-train=no
Disallow: /private/

User-agent: otherbot
Content-Signal: search=no

User-agent: MyBot
user-agent: friendbot
CONTENT-SIGNAL: ai-input = YES ; ai-train=yes
Allow: /
"""


def test_a_line_before_any_group_is_for_all_and_a_group_for_its_agents():
    assert robots_usage(ROBOTS, "somebot") == {
        "train-ai": "n", "search": "yes", "ai-train": "no"
    }  # fmt: skip
    # this crawler's own group over *: its lines win
    assert robots_usage(ROBOTS, "mybot") == {
        "train-ai": "n", "search": "yes", "ai-train": "yes", "ai-input": "yes"
    }  # fmt: skip
    assert robots_usage(ROBOTS, "friendbot")["ai-input"] == "yes"
    assert robots_usage(b"User-agent: *\nDisallow: /\n", "mybot") == {}
    assert robots_usage(b"\xff\xfe garbage: \x00", "mybot") == {}


def test_preferences_are_bounded_and_what_is_not_one_is_ignored():
    assert preferences("search=yes, junk, =no, ai-train=") == {"search": "yes"}
    assert len(preferences(",".join(f"k{n}=v" for n in range(100)))) == PREFERENCES_KEPT
    assert preferences("a" * 500 + "=" + "b" * 500) == {"a" * 64: "b" * 64}


def test_headers_say_what_the_page_may_be_used_for():
    assert header_usage([b"search=yes", b"ai-train=no"]) == {"search": "yes", "ai-train": "no"}
    assert header_usage([]) == {}
