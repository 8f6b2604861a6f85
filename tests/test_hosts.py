"""One host state for the whole cluster (extensions/frontier/hosts/state.py), against a
real Redis: holds, strikes, the adaptive rate, send slots, and host state that
another writer left malformed."""

import json
import time

import pytest

from extensions.frontier.frontier import Frontier, now_ms
from extensions.frontier.hosts.holds import HoldsHeard
from extensions.frontier.hosts.state import AGAIN, BAN, ERRORS, OK, PUSH, Backoff, Event, HostStates
from extensions.keys import SpiderKeys
from tests.conftest import crawler_with_addon


@pytest.fixture
def keys():
    return SpiderKeys.for_spider("h")


def entry(url: str):
    from extensions.frontier.groups import group_for

    return ("", group_for(url), 0, json.dumps({"url": url}).encode())


def host(redis_client, keys, group: str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in redis_client.hgetall(keys.host(group)).items()}


def refusals(states, group: str, n: int, **kw) -> list:
    """``n`` pages of ``group`` refused for the first time, the last report's rows."""
    rows = []
    for _ in range(n):
        rows = states.report([Event(group, PUSH, **kw)])
    return rows


def test_a_host_refusing_a_real_share_of_its_answers_is_held_for_every_node(redis_client, keys):
    states = HostStates(redis_client, keys, Backoff(base=2.0))
    one, two = Frontier(redis_client, keys, "n1"), Frontier(redis_client, keys, "n2")
    one.enqueue([entry(f"http://busy/{i}") for i in range(4)] + [entry("http://calm/0")])
    # the first refusals are evidence, not a verdict (HOST_BACKOFF_MIN_REFUSALS = 4)
    assert refusals(states, "busy", 3) == []
    assert "hold" not in host(redis_client, keys, "busy")
    before = time.time()
    [held] = refusals(states, "busy", 1)
    after = time.time()
    assert held.group == "busy" and held.why == "push"
    assert before + 1.0 <= held.until <= after + 2.0  # half to all of the base, jittered
    assert host(redis_client, keys, "busy")["cut"] == "4/4"  # refused / answers, as decided
    # no node leases the held host; the others go on
    leases, _ = two.lease(10, lease_timeout=60)
    assert [lease.member.split(b"\n")[0] for lease in leases] == [b"calm"]
    assert redis_client.zscore(keys.waiting, "busy") == pytest.approx(held.until * 1000, abs=1)
    one.enqueue([entry("http://busy/found-meanwhile")])  # waits with its host too
    assert one.lease(10, lease_timeout=60)[0] == []
    redis_client.zadd(keys.waiting, {"busy": now_ms() - 1})  # the hold is over
    redis_client.hset(keys.host("busy"), "hold", now_ms() - 1)
    assert len(two.lease(10, lease_timeout=60)[0]) >= 1


def test_a_few_pages_refused_among_many_answers_never_slow_the_host(redis_client, keys):
    states = HostStates(redis_client, keys)
    redis_client.hset(keys.host("big"), "orate", 20)
    # 400 good answers (a node's history, then reports) and 10 pages refused: 2.4 %
    states.report([Event("big", PUSH, history=200.0)])
    for _ in range(9):
        states.report([Event("big", OK, answers=20, latency=0.05)])
        states.report([Event("big", PUSH)])
    state = host(redis_client, keys, "big")
    assert "arate" not in state and "hold" not in state and "strikes" not in state
    assert state["page_refusals"] == "10" and "pushbacks" not in state
    assert float(state["er"]) / float(state["en"]) < 0.05
    assert float(state["ew"]) > now_ms()  # watched: the nodes report its answers


def test_refusals_in_the_second_before_a_report_weigh_against_every_answer_of_that_second(
    redis_client, keys
):
    """A healthy host at full speed whose pages fail 2 % of the time, on one node:
    20 answers, a first refusal, then 99 good answers and three more refusals
    inside the second before the node reports the good ones. Each refusal
    brings the answers waiting for that report: 4 in 123 is no host refusing
    (4 in 24 would be)."""
    from extensions.frontier.hosts.answers import AnswerLedger

    states, ledger = HostStates(redis_client, keys), AnswerLedger(window=40.0)
    for _ in range(20):
        ledger.answered("fast", watched=False, latency=0.01)
    held = states.report([Event("fast", PUSH, history=ledger.refused("fast"))])
    for _ in range(3):
        for _ in range(33):
            ledger.answered("fast", watched=False, latency=0.01)
        held += states.report([Event("fast", PUSH, history=ledger.refused("fast"))])
    assert held == [] and "arate" not in host(redis_client, keys, "fast")
    assert float(host(redis_client, keys, "fast")["en"]) == pytest.approx(123, abs=1)
    assert ledger.take_reports() == []  # each answer reached Redis once


def test_a_page_refused_with_retry_after_holds_the_host_while_it_runs_and_no_longer(
    redis_client, keys
):
    states = HostStates(redis_client, keys, Backoff(base=2.0, cap=30.0))
    states.report([Event("slow", PUSH, history=100.0)])
    before = time.time()
    [held] = states.report([Event("slow", PUSH, retry_after=5.0)])
    assert held.why == "retry-after" and before + 4.9 <= held.until <= time.time() + 5.0
    state = host(redis_client, keys, "slow")
    assert state["why"] == "retry-after" and "strikes" not in state and "arate" not in state
    # a longer Retry-After still holds, capped by HOST_BACKOFF_MAX
    [longer] = states.report([Event("slow", PUSH, retry_after=86400 * 365)])
    assert longer.until - time.time() == pytest.approx(30.0, abs=0.5)


def test_strikes_grow_the_hold_and_quiet_forgives_them(redis_client, keys):
    states = HostStates(redis_client, keys, Backoff(base=1.0, cap=100.0, forgive=10.0))
    key = keys.host("often")
    holds = []
    for _ in range(4):
        before = time.time()
        [held] = states.report([Event("often", ERRORS)])
        holds.append((held.until - before, held.until - time.time()))  # at most, at least
        redis_client.hset(key, mapping={"hold": now_ms() - 1, "cutat": 0})  # the next is new
    assert host(redis_client, keys, "often")["strikes"] == "4"
    most, least = holds[-1]
    assert most >= 4.0 and least <= 8.0  # 8 s, jittered to half or more
    redis_client.hset(key, "pushed", now_ms() - 25_000)  # 25 quiet seconds: two forgiven
    states.report([Event("often", ERRORS)])
    assert host(redis_client, keys, "often")["strikes"] == "3"


def test_the_adaptive_rate_is_cut_on_evidence_and_climbs_back_while_it_answers_well(
    redis_client, keys
):
    states = HostStates(redis_client, keys, Backoff(min_rate=0.5, step=2.0))
    redis_client.hset(keys.rates, mapping={"*": 0, "limited": 8})
    refusals(states, "limited", 4, history=4.0)  # a fifth of its answers refused
    state = host(redis_client, keys, "limited")
    # cut, and what it took of what it was sent is where it climbs back to, fast
    assert float(state["arate"]) <= 8 * 0.85 and float(state["peak"]) == 8 * 0.8
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry("http://limited/1")])
    redis_client.hset(keys.host("limited"), "hold", now_ms() - 1)
    redis_client.zadd(keys.waiting, {"limited": now_ms() - 1})
    [lease] = frontier.lease(5, lease_timeout=60)[0]
    assert lease.watched and lease.slot  # paced at its adaptive rate, its answers reported
    # good answers raise it, once a step, until it is back at its own rate
    key = keys.host("limited")
    for _ in range(40):
        ago = now_ms() - 20_001
        redis_client.hset(key, mapping={"changed": ago, "pushed": ago, "rl": ago})
        restored = states.report([Event("limited", OK, answers=5, latency=0.01)])
        if restored:
            break
    assert [h.why for h in restored] == ["restored"]
    assert "arate" not in host(redis_client, keys, "limited")
    # never below the floor
    for _ in range(10):
        redis_client.hset(key, mapping={"hold": now_ms() - 1, "cutat": 0})
        states.report([Event("limited", ERRORS)])
    assert float(host(redis_client, keys, "limited")["arate"]) == 0.5


def test_a_climbing_latency_holds_the_rate_down(redis_client, keys):
    states = HostStates(redis_client, keys, Backoff(step=2.0))
    redis_client.hset(keys.rates, mapping={"*": 0, "h": 10})
    states.report([Event("h", ERRORS)])
    key = keys.host("h")
    redis_client.hset(key, mapping={"changed": now_ms() - 5000, "pushed": now_ms() - 5000})
    states.report([Event("h", OK, answers=3, latency=0.1)])  # sets the best latency seen
    before = float(host(redis_client, keys, "h")["arate"])
    redis_client.hset(key, mapping={"changed": now_ms() - 5000})
    states.report([Event("h", OK, answers=3, latency=2.0)])  # twenty times slower
    assert float(host(redis_client, keys, "h")["arate"]) == before


def test_a_page_refused_again_is_no_evidence_against_its_host(redis_client, keys):
    states = HostStates(redis_client, keys)
    assert states.report([Event("h", AGAIN)] * 10) == []  # one page, refused again: its own
    state = host(redis_client, keys, "h")
    assert "hold" not in state and float(state.get("er", 0)) == 0
    before = time.time()
    [held] = states.report([Event("h", AGAIN, retry_after=3.0)])
    assert before + 2.9 <= held.until <= time.time() + 3.0
    assert "strikes" not in host(redis_client, keys, "h")


def test_a_slowed_host_refusing_again_at_the_same_pace_is_cut_again(redis_client, keys):
    states = HostStates(redis_client, keys)
    redis_client.hset(keys.rates, mapping={"*": 0, "h": 10})
    refusals(states, "h", 4, history=4.0)
    key = keys.host("h")
    first = float(host(redis_client, keys, "h")["arate"])
    redis_client.hset(key, mapping={"hold": now_ms() - 1, "cutat": now_ms() - 10_000})
    states.report([Event("h", OK, answers=30, latency=0.05)])
    # one refusal at the new pace: that pace is its ceiling, no cut
    assert states.report([Event("h", PUSH)]) == []
    assert float(host(redis_client, keys, "h")["peak"]) == first
    states.report([Event("h", OK, answers=30, latency=0.05)])
    [cut] = states.report([Event("h", PUSH)])  # again at that pace, 30 answers later
    assert cut.why == "push" and cut.rate == pytest.approx(first * 0.85, rel=0.01)


def test_a_slowed_host_refused_once_it_climbed_back_near_its_ceiling_is_cut_at_once(
    redis_client, keys
):
    """A limiter with a burst refuses once the burst is spent: past 90 % of the
    ceiling, one refusal is the limiter's, not a page's."""
    states = HostStates(redis_client, keys)
    redis_client.hset(keys.rates, mapping={"*": 0, "h": 10})
    refusals(states, "h", 4, history=4.0)
    key = keys.host("h")
    peak = float(host(redis_client, keys, "h")["peak"])
    climbed = round(peak * 0.95, 3)
    redis_client.hset(key, mapping={"arate": climbed, "hold": now_ms() - 1,
                                    "cutat": now_ms() - 10_000})  # fmt: skip
    [cut] = states.report([Event("h", PUSH)])
    assert cut.why == "push" and cut.rate == pytest.approx(climbed * 0.85, rel=0.01)
    assert float(host(redis_client, keys, "h")["peak"]) == climbed  # where it refused


def test_a_slowed_host_refused_while_probing_takes_the_pace_before_the_last_step_as_ceiling(
    redis_client, keys
):
    """Probing finds whether the host takes more: it took each step up to the one
    it refused, so its ceiling is the pace before that step (the refused pace
    was over its limit: a ceiling there came back above a real limiter)."""
    states = HostStates(redis_client, keys)
    redis_client.hset(keys.rates, mapping={"*": 0, "h": 10})
    refusals(states, "h", 4, history=4.0)
    key = keys.host("h")
    peak = float(host(redis_client, keys, "h")["peak"])
    took = peak * 1.01 * 1.02 * 1.04  # three probing steps past it, taken
    probed = round(took * 1.08, 3)  # the fourth, refused
    redis_client.hset(key, mapping={"arate": probed, "probe": 4, "hold": now_ms() - 1,
                                    "cutat": now_ms() - 10_000})  # fmt: skip
    [cut] = states.report([Event("h", PUSH)])
    assert cut.why == "push" and cut.rate == pytest.approx(probed * 0.85, rel=0.01)
    assert float(host(redis_client, keys, "h")["peak"]) == pytest.approx(took, rel=0.001)


def test_every_node_hears_of_a_hold_at_its_next_poll_and_a_malformed_entry_is_skipped(
    redis_client, keys
):
    other = HoldsHeard(redis_client, keys, now=time.time() - 1)
    states = HostStates(redis_client, keys)
    assert other.poll() == []
    states.report([Event("h", PUSH, retry_after=3.0)])  # a page's Retry-After holds its host
    [(group, until)] = other.poll()
    assert group == "h" and 2.5 < until - time.time() <= 3.0
    assert other.poll() == []  # heard once
    # written by anyone: ignored and counted; a hold already over is not news
    redis_client.xadd(keys.holds, {"g": "x", "u": "soon"})
    redis_client.xadd(keys.holds, {"u": "1"})
    redis_client.xadd(keys.holds, {"g": "old", "u": str(now_ms() - 5000)})
    redis_client.xadd(keys.holds, {"g": "fine", "u": str(now_ms() + 5000)})
    assert [group for group, _ in other.poll()] == ["fine"]
    assert other.bad == 2
    # a node that started after a hold was set hears only what comes next
    assert HoldsHeard(redis_client, keys, now=time.time() + 1).poll() == []


def test_a_ban_counts_apart_from_pushbacks(redis_client, keys):
    states = HostStates(redis_client, keys)
    states.report([Event("h", BAN)])
    state = host(redis_client, keys, "h")
    assert state["bans"] == "1" and state["why"] == "ban" and "pushbacks" not in state


def test_a_late_send_takes_a_free_slot_or_waits_for_the_next_and_a_held_host_says_so(
    redis_client, keys
):
    states = HostStates(redis_client, keys, Backoff(tolerance=0.02))
    redis_client.hset(keys.rates, mapping={"*": 0, "paced": 2})  # 500 ms apart
    frontier = Frontier(redis_client, keys, "n1", send_tolerance=0.02)
    frontier.enqueue([entry(f"http://paced/{i}") for i in range(3)])
    [first] = frontier.lease(5, lease_timeout=60)[0]
    assert first.window == pytest.approx(0.010, abs=0.001)  # 2 % of 500 ms
    # late for its slot, and no later slot handed out: it goes now, the next follows it
    time.sleep(max(first.slot + first.window + 0.03 - time.time(), 0))
    verdict, _, _ = states.ask_to_send("paced", first.slot, first.window)
    assert verdict == "send"
    assert int(host(redis_client, keys, "paced")["next"]) >= now_ms() + 490
    # a later slot was handed out meanwhile: the late one takes nothing that far
    # ahead (it would be late for that one too), it asks again when it is near
    redis_client.zadd(keys.waiting, {"paced": now_ms() - 1})
    [second] = frontier.lease(5, lease_timeout=60)[0]
    taken = host(redis_client, keys, "paced")["next"]
    verdict, when, _ = states.ask_to_send("paced", first.slot, first.window)
    assert verdict == "later" and when >= second.slot + 0.5 - 0.1 - 0.002
    assert host(redis_client, keys, "paced")["next"] == taken
    # asked again then, it takes the slot after the second one
    time.sleep(max(when - time.time(), 0))
    verdict, slot, window = states.ask_to_send("paced", first.slot, first.window)
    assert verdict == "wait" and slot >= second.slot + 0.5 and window > 0
    states.report([Event("paced", AGAIN, retry_after=4.0)])
    verdict, until, _ = states.ask_to_send("paced", 0, 0)
    assert verdict == "hold" and until - time.time() > 3.5


def test_malformed_host_state_is_ignored_and_counted_never_breaking_a_lease(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    states = HostStates(redis_client, keys)
    frontier.enqueue([entry("http://odd/1"), entry("http://odd/2")])
    redis_client.hset(
        keys.host("odd"),
        mapping={"arate": "fast", "hold": "-5", "next": "soon", "win": "x", "strikes": "many"},
    )
    leases, _ = frontier.lease(5, lease_timeout=60)
    assert len(leases) == 2 and not any(lease.slot for lease in leases)
    assert frontier.tally.bad_host_fields >= 3
    [held] = states.report([Event("odd", PUSH, retry_after=1.0)])
    assert held.until > time.time()
    assert states.bad_fields >= 2
    assert states.ask_to_send("odd", 0, 0)[0] == "hold"


def test_an_absurd_retry_after_is_capped_or_ignored_and_counted(redis_url, redis_client):
    from scrapy import Spider
    from scrapy.http import Response

    from extensions.downloadermiddlewares.pushback import PushbackMiddleware

    class Polite(Spider):
        name = "polite"

    crawler = crawler_with_addon(Polite, {"REDIS_URL": redis_url, "HOST_BACKOFF_MAX": 600})
    crawler.stats.open_spider()
    middleware = PushbackMiddleware.from_crawler(crawler)

    def retry_after(value: str) -> float | None:
        response = Response("http://h/", status=429, headers={"Retry-After": value})
        return middleware._retry_after(response)

    assert retry_after("7") == 7.0
    assert retry_after("Fri, 01 Jan 2100 00:00:00 GMT") == 600  # years ahead: capped
    assert retry_after("86400000") == 600
    assert crawler.stats.get_value("hosts/retry_after_capped") == 2
    for garbage in ("-5", "soon", "1e9", ""):
        assert retry_after(garbage) is None, garbage
    assert crawler.stats.get_value("hosts/retry_after_unreadable") == 4
    assert retry_after("Thu, 01 Jan 1970 00:00:00 GMT") == 0.0  # already past: no wait


def test_ban_pages_are_told_from_content():
    from scrapy import Request
    from scrapy.http import HtmlResponse

    from extensions.bans import BanDetector

    def page(body: str, status: int = 200) -> HtmlResponse:
        return HtmlResponse("http://h/", status=status, body=body.encode(), encoding="utf-8")

    detector = BanDetector({403}, [b"access denied by acme"])
    request = Request("http://h/")
    challenge = "<html><title>Just a moment...</title><script src='/cdn-cgi/challenge-platform/x'>"
    assert detector.is_ban(request, page(challenge, 503))
    assert detector.is_ban(request, page("<form>Please complete the captcha</form>"))
    assert detector.is_ban(request, page("<p>Access denied by ACME</p>" + "x" * 50_000))
    assert detector.is_ban(request, page("forbidden", 403))
    # a real page that embeds a captcha widget (a contact form) is content
    assert not detector.is_ban(request, page("<div class='g-recaptcha'></div>" + "x" * 30_000))
    assert not detector.is_ban(request, page("<p>a product</p>"))
    assert not detector.is_ban(request, page("captcha", 404))  # an error page, not a challenge

    class Says:
        def response_is_ban(self, request, response):
            return b"sorry" in response.body or None  # None: the rules decide

    spider_rules = BanDetector({403}, [], Says())
    assert spider_rules.is_ban(request, page("<p>sorry</p>" + "x" * 30_000))
    assert spider_rules.is_ban(request, page("forbidden", 403))
