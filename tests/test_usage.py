"""What a site says its content may be used for: Content-Signal and
Content-Usage, in robots.txt and in headers."""

from __future__ import annotations

import pytest

from extensions.usage import (
    PREFERENCES_KEPT,
    Problems,
    header_usage,
    preferences,
    refusal_wins,
    robots_usage,
)

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
    assert robots_usage(ROBOTS, "somebot").for_path("/") == {
        "train-ai": "n", "search": "yes", "ai-train": "no"
    }  # fmt: skip
    # this crawler's own group over *: its lines win
    assert robots_usage(ROBOTS, "mybot").for_path("/any") == {
        "train-ai": "n", "search": "yes", "ai-train": "yes", "ai-input": "yes"
    }  # fmt: skip
    assert robots_usage(ROBOTS, "friendbot").for_path("/")["ai-input"] == "yes"
    assert not robots_usage(b"User-agent: *\nDisallow: /\n", "mybot")
    assert not robots_usage(b"\xff\xfe garbage: \x00", "mybot")


# the IETF attachment draft's example: a site that refuses AI training but for one path
DRAFT = b"""User-Agent: *
Allow: /
Content-Usage: train-ai=n
Content-Usage: /ai-ok/ train-ai=y
Content-Usage: /*.pdf$ train-ai=n, search=n

User-Agent: mybot
Content-Usage: /mine/ train-genai=y
"""


def test_content_usage_rules_apply_by_path_the_longest_winning_not_as_keys():
    usage = robots_usage(DRAFT, "somebot")
    assert usage.for_path("/") == {"train-ai": "n"}
    assert usage.for_path("/ai-ok/page?x=1") == {"train-ai": "y"}
    assert usage.for_path("/ai-ok/paper.pdf") == {"train-ai": "n", "search": "n"}
    assert usage.for_path("/ai-ok/paper.pdf?download") == {"train-ai": "y"}  # $: the end
    # the crawler's own group has rules: they alone apply to it
    mine = robots_usage(DRAFT, "mybot")
    assert mine.for_path("/mine/x") == {"train-genai": "y"} and mine.for_path("/") == {}


def test_a_value_is_a_structured_field_dictionary_its_parameters_no_preferences():
    problems = Problems()
    assert header_usage([b'train-ai=n;reason="not for models", search=y'], True, problems) == {
        "train-ai": "n", "search": "y"
    }  # fmt: skip
    # a label outside the vocabulary, a value that is not y or n: counted, left out
    assert header_usage([b"train-ai=y, foo=n, search=maybe, bots"], True, problems) == {
        "train-ai": "y"
    }  # fmt: skip
    assert (problems.unknown, problems.unparsed) == (3, 0)
    assert header_usage([b"train-ai=n,,=("], True, problems) == {}
    assert problems.unparsed == 1
    usage = robots_usage(b"Content-Usage: /x/ train-ai=(\nContent-Usage: train-ai=y\n", "b")
    assert usage.for_path("/x/1") == {"train-ai": "y"} and usage.problems.unparsed == 1


def test_statements_combine_so_that_a_refusal_wins():
    assert refusal_wins({"train-ai": "y"}, {"train-ai": "n"}) == {"train-ai": "n"}
    assert refusal_wins({"train-ai": "n"}, {"train-ai": "y"}) == {"train-ai": "n"}
    assert refusal_wins({"search": "yes"}, {"search": "n", "bots": "y"}) == {
        "search": "n", "bots": "y"
    }  # fmt: skip
    # two headers of one page: any refusal wins too
    assert header_usage([b"train-ai=y", b"train-ai=n"], True) == {"train-ai": "n"}


def test_preferences_are_bounded_and_what_is_not_one_is_ignored():
    assert preferences("search=yes, junk, =no, ai-train=") == {"search": "yes"}
    assert len(preferences(",".join(f"k{n}=v" for n in range(100)))) == PREFERENCES_KEPT
    assert preferences("a" * 500 + "=" + "b" * 500) == {"a" * 64: "b" * 64}


def test_headers_say_what_the_page_may_be_used_for():
    assert header_usage([b"search=yes", b"ai-train=no"]) == {"search": "yes", "ai-train": "no"}
    assert header_usage([]) == {}
