"""The politeness law (``scripts/_politeness.lua``) per event, without Redis: the
very Lua that ``host_feedback.lua`` runs inside Redis, run here in Lua 5.1 (the
version Redis embeds) through lupa. A host's state goes in, the decision comes
out; ``Host`` applies it as the script does (fields set and removed, counters
added), so a sequence of answers can be followed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from lupa import lua51

from extensions.frontier.hosts.state import Backoff
from extensions.frontier.redisops import script_source

NOW = 1_800_000_000_000  # ms
B = Backoff()  # the project's defaults, as host_feedback.lua is given them
BASE_MS, CAP_MS, STEP_MS = int(B.base * 1000), int(B.cap * 1000), int(B.step * 1000)
RAISE = B.raise_by


@pytest.fixture(scope="module")
def law():
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True)
    source = script_source("_politeness")
    assert "redis." not in source  # the law reads and writes nothing itself
    exported = runtime.execute(
        source + "\nreturn {refused = law_refused, answered = law_answered, fields = HOST_FIELDS}"
    )
    return runtime, exported


@dataclass
class Decision:
    set: dict[str, Any]
    delete: list[str]
    incr: dict[str, int]
    an: float
    hold: float | None
    banned: bool | None
    out: list[str] | None
    address: list[Any] | None
    bad: int


@dataclass
class Host:
    """A host's hash as the script keeps it, and its configured rate."""

    fields: dict[str, Any] = field(default_factory=dict)
    rate: float = 0.0

    def apply(self, d: Decision) -> Decision:
        self.fields.update({k: str(v) for k, v in d.set.items()})
        for name in d.delete:
            self.fields.pop(name, None)
        for name, n in d.incr.items():
            self.fields[name] = str(int(self.fields.get(name, 0)) + n)
        self.fields["an"] = str(float(self.fields.get("an", 0)) + d.an)
        return d


def config(law, now: int = NOW, **overrides: Any) -> Any:
    runtime, _ = law
    values = {
        "now": now, "base": BASE_MS, "cap": CAP_MS, "forgive": int(B.forgive * 1000),
        "adaptive": B.adaptive, "floor_rate": B.min_rate, "window": int(B.window * 1000),
        "step": STEP_MS, "raise": RAISE, "share": B.share, "min_refusals": B.min_refusals,
    }  # fmt: skip
    return runtime.table_from({**values, **overrides})


def _decision(d: Any, bad: int) -> Decision:
    def listed(table: Any) -> list[Any] | None:
        return None if table is None else [table[i] for i in range(1, len(table) + 1)]

    return Decision(
        set=dict(d.set.items()), delete=listed(d["del"]) or [], incr=dict(d.incr.items()),
        an=d.an, hold=d.hold, banned=d.banned, out=listed(d.out), address=listed(d.address),
        bad=bad,
    )  # fmt: skip


def refused(law, host: Host, kind: str, *, retry_after_ms: int = -1, jitter: float = 0.5,
            history: float = 0.0, now: int = NOW, **overrides: Any) -> Decision:  # fmt: skip
    runtime, exported = law
    state = runtime.table_from({**host.fields, "rate": host.rate})
    bad = runtime.table_from({"bad": 0})
    d = exported.refused(bad, state, config(law, now, **overrides), kind, retry_after_ms,
                         jitter, history)  # fmt: skip
    return host.apply(_decision(d, bad.bad))


def answered(law, host: Host, answers: int, latency_ms: float = 100.0, *, now: int = NOW,
             **overrides: Any) -> Decision:  # fmt: skip
    runtime, exported = law
    state = runtime.table_from({**host.fields, "rate": host.rate})
    bad = runtime.table_from({"bad": 0})
    d = exported.answered(bad, state, config(law, now, **overrides), answers, latency_ms)
    return host.apply(_decision(d, bad.bad))


def leased_at(rate: float) -> dict[str, str]:
    """A host the lease saw at ``rate`` requests/s over the last ten seconds."""
    return {"win": str(NOW - 10_000), "wl": "0", "leased": str(int(rate * 10))}


# --- refusals --------------------------------------------------------------------


def test_a_ban_holds_the_host_at_once_and_halves_the_pace_it_was_leased_at(law):
    host = Host(leased_at(4.0))
    d = refused(law, host, "ban", jitter=0.0)
    assert d.hold == NOW + BASE_MS / 2  # equal jitter: half the base, plus up to half
    assert d.banned is True and d.incr == {"bans": 1}
    assert d.out == [str(NOW + BASE_MS // 2), "ban", "2.000"]
    assert host.fields["arate"] == "2.000" and host.fields["peak"] == "4.000"
    assert host.fields["strikes"] == "1" and d.address[1] == "ban"


def test_each_strike_doubles_the_hold_up_to_the_cap_and_quiet_forgives_them(law):
    host = Host()
    holds = []
    for n in range(4):
        at = NOW + n * 10
        holds.append(refused(law, host, "errors", jitter=1.0, now=at).hold - at)
        host.fields["hold"] = "0"  # each comes after the hold it met
    assert holds == [BASE_MS, 2 * BASE_MS, 4 * BASE_MS, 8 * BASE_MS]
    assert refused(law, host, "errors", jitter=1.0, base=CAP_MS).hold == NOW + CAP_MS
    host.fields.update(hold="0", strikes="5", pushed=str(NOW))
    later = NOW + 5 * int(B.forgive * 1000)
    refused(law, host, "errors", now=later)
    assert host.fields["strikes"] == "1"  # five forgiven, then this one


def test_one_page_refused_is_the_pages_alone_and_its_retry_after_holds_the_host(law):
    host = Host(leased_at(4.0))
    d = refused(law, host, "push")
    assert d.hold is None and d.incr == {"page_refusals": 1} and "arate" not in host.fields
    d = refused(law, host, "again", retry_after_ms=30_000, now=NOW + 1)
    assert d.hold == NOW + 1 + 30_000 and host.fields["why"] == "retry-after"
    assert d.banned is None and "strikes" not in host.fields


def test_refusals_of_distinct_pages_surely_above_the_share_hold_the_host(law):
    host = Host(leased_at(4.0))
    answered(law, host, 4)
    decisions = [refused(law, host, "push", now=NOW + n) for n in range(1, 5)]
    assert [d.hold is not None for d in decisions] == [False, False, False, True]
    assert decisions[-1].incr == {"pushbacks": 1} and decisions[-1].banned is False
    assert host.fields["cut"] == "4/8"  # the evidence, for a person
    # a first cut goes by the share refused (half), and no further than the good answers
    assert float(host.fields["arate"]) == pytest.approx(min(4 * 0.5, 4 * 1000 / 2000), 0.01)


def test_the_same_refusals_among_many_good_answers_are_a_sites_bad_luck(law):
    host = Host(leased_at(4.0))
    answered(law, host, 56)
    decisions = [refused(law, host, "push", now=NOW + n) for n in range(1, 5)]
    assert all(d.hold is None for d in decisions)
    assert host.fields["page_refusals"] == "4"


def test_refusals_right_after_a_cut_are_echoes_of_the_old_pace(law):
    host = Host({"arate": "2.000", "peak": "4.000", "cutat": str(NOW - 500)})
    d = refused(law, host, "push")
    assert d.hold is None and host.fields["er"] == "0.000"  # no evidence
    assert "rl" not in host.fields


def test_a_slowed_host_that_refuses_past_its_ceiling_is_cut_by_fifteen_percent(law):
    host = Host({"arate": "4.200", "peak": "4.000", "probe": "3", "cutat": str(NOW - 60_000)})
    d = refused(law, host, "again")
    assert d.hold is not None and d.out[1] == "push"  # the host's, whichever page
    assert host.fields["arate"] == f"{4.2 * 0.85:.3f}"
    # it took the pace before the probe's last step (4 % of it)
    assert float(host.fields["peak"]) == pytest.approx(4.2 / 1.04, 0.001)


def test_a_retry_after_longer_than_a_running_hold_extends_it_and_says_so(law):
    host = Host({"hold": str(NOW + 10_000), "why": "push"})
    d = refused(law, host, "ban", retry_after_ms=5_000)
    assert d.hold is None and d.out is None  # an echo of the hold: within it
    d = refused(law, host, "again", retry_after_ms=60_000)
    assert d.hold == NOW + 60_000 and d.out == [str(NOW + 60_000), "echo", ""]
    assert host.fields["why"] == "push"  # a running hold keeps its reason


def test_malformed_fields_another_writer_left_are_ignored_and_counted(law):
    host = Host({"arate": "fast", "strikes": "-3", "en": "nan", "hold": "1e999"})
    d = refused(law, host, "ban")
    assert d.bad == 4 and d.hold is not None and host.fields["strikes"] == "1"


# --- good answers ------------------------------------------------------------------


def test_good_answers_of_a_host_never_slowed_only_add_to_its_evidence(law):
    host = Host()
    d = answered(law, host, 10)
    assert set(d.set) == {"en", "er", "et"} and d.an == 10 and d.out is None


def test_a_slowed_host_climbs_back_fast_far_below_its_ceiling_then_by_steps(law):
    host = Host({"arate": "1.000", "peak": "4.000", "changed": "0", "pushed": "0"})
    answered(law, host, 5)
    assert host.fields["arate"] == f"{1 + 2.5 * RAISE:.3f}"
    host.fields.update(arate="3.000")  # past half its ceiling: a tenth, to 80 % at most
    answered(law, host, 5, now=NOW + STEP_MS)
    assert host.fields["arate"] == f"{min(3 * (1 + RAISE), 3.2):.3f}"
    host.fields.update(arate="3.600")  # close: 1 % of the ceiling a step
    answered(law, host, 5, now=NOW + 2 * STEP_MS)
    assert host.fields["arate"] == "3.640"


def test_at_its_ceiling_a_quiet_host_is_probed_in_growing_steps(law):
    host = Host({"arate": "4.000", "peak": "4.000", "changed": "0", "pushed": "0",
                 "rl": str(NOW - 10 * STEP_MS)})  # fmt: skip
    rates = []
    for n in range(3):
        answered(law, host, 5, now=NOW + n * STEP_MS)
        rates.append(float(host.fields["arate"]))
    assert rates == pytest.approx([4.04, 4.04 * 1.02, 4.04 * 1.02 * 1.04], abs=0.002)
    host.fields["rl"] = str(NOW + 3 * STEP_MS)  # refused lately: no probing for ten steps
    assert "arate" not in answered(law, host, 5, now=NOW + 4 * STEP_MS).set


def test_no_raise_during_a_hold_nor_while_the_hosts_latency_climbs(law):
    slowed = {"arate": "1.000", "peak": "4.000", "changed": "0", "pushed": "0"}
    held = Host({**slowed, "hold": str(NOW + 1)})
    assert "arate" not in answered(law, held, 5).set
    slow = Host({**slowed, "lat_min": "100"})
    assert "arate" not in answered(law, slow, 5, latency_ms=250).set
    assert slow.fields["lat"] == "250"


def test_a_host_back_at_its_configured_rate_is_no_longer_watched(law):
    host = Host({"arate": "1.990", "peak": "2.000", "changed": "0", "pushed": "0"}, rate=2.0)
    d = answered(law, host, 5)
    assert d.out == ["0", "restored", ""] and "arate" not in host.fields
    assert "peak" not in host.fields and "cutat" not in host.fields
