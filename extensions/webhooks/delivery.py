"""The outbox to the URLs: each node reads it in the consumer group ``senders``
and POSTs each event, signed as Standard Webhooks signs (the ``standardwebhooks``
library: ``webhook-id``, ``webhook-timestamp``, ``webhook-signature``, HMAC-SHA256
of id, timestamp and body), so its libraries verify it.

An answer in 2xx is a delivery. Anything else (another status, a refused
connection, no answer in ``WEBHOOK_TIMEOUT``, a redirect, which is not
followed) is tried again 1 s later, then 2, 4... (at most 10 min), up to
``WEBHOOK_RETRIES`` times; then the event goes to ``NAME:webhooks:dead`` with
the last error. An event a node took and never finished (the node died) is
taken over by another after ``CLAIM_AFTER``. Each try carries the event's id:
a receiver tells a repeat by it (a node killed between a URL's answer and its
acknowledgement sends that event again).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

import redis
from standardwebhooks.webhooks import Webhook

from extensions import clock, connection
from extensions.frontier.redisops import fields, load_script, run_named

if TYPE_CHECKING:
    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)

GROUP = "senders"
#: events one look takes at most
BATCH = 20
#: seconds after which an event a node took unfinished is another node's
CLAIM_AFTER = 30.0
MAX_DELAY = 600.0
FIELDS = ("id", "type", "url", "body", "attempt")


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a redirect is an answer that is not a delivery


_OPENER = urllib.request.build_opener(_NoRedirects)


def delay_after(attempt: int) -> float:
    """Seconds before the try after failed try ``attempt`` (1 the first)."""
    return min(2.0 ** (attempt - 1), MAX_DELAY)


class Outbox:
    def __init__(
        self,
        server: redis.Redis,
        keys: SpiderKeys,
        node_id: str,
        secret: str,
        *,
        retries: int,
        timeout: float,
        user_agent: str = "",
    ):
        self.server = server
        self.node_id = node_id
        self.stream = keys.named("webhooks")
        self.later = keys.named("webhooks_later")
        self.dead = keys.named("webhooks_dead")
        self.signer = Webhook(secret)
        self.retries = retries
        self.timeout = timeout
        self.user_agent = user_agent
        self.delivered = 0
        self.failed = 0
        self.dead_count = 0
        self.group_missing = True
        self._due = server.register_script(load_script("extensions.webhooks:webhook_due"))

    def open(self) -> None:
        try:
            self.server.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self.group_missing = False

    def send_due(self) -> int:
        """One look: events due again, events a dead node left, new ones; each
        sent once. Returns how many were taken."""
        self._bring_back_due()
        claimed: Any = self.server.xautoclaim(
            self.stream, GROUP, self.node_id, int(CLAIM_AFTER * 1000), "0-0", count=BATCH
        )
        taken: list[Any] = list(claimed[1])
        answer: Any = self.server.xreadgroup(GROUP, self.node_id, {self.stream: ">"}, count=BATCH)
        for _stream, entries in answer or []:
            taken.extend(entries)
        for entry_id, raw in taken:
            if raw:  # (an entry deleted meanwhile comes back empty)
                event = {connection.text(k): connection.text(v) for k, v in raw.items()}
                self._send(entry_id, event)
        return len(taken)

    def waiting(self) -> int:
        """Events in the outbox (to send now, or being sent) and to try again."""
        return int(self.server.xlen(self.stream)) + int(self.server.zcard(self.later))

    def due_by(self, moment: float) -> bool:
        """Whether an event is to be tried again by ``moment`` (s)."""
        return bool(self.server.zcount(self.later, 0, int(moment * 1000)))

    def _bring_back_due(self) -> None:
        keys = {"later": self.later, "outbox": self.stream, "dead": self.dead}
        args = {"now": int(clock.now() * 1000), "batch": BATCH}
        result = fields(run_named(self._due, keys, args))
        if int(result["refused"]):
            logger.warning("%s held entries that are no event: kept in %s", self.later, self.dead)

    def _send(self, entry_id: Any, event: dict[str, str]) -> None:
        attempt = int(event["attempt"]) + 1 if event.get("attempt", "").isdigit() else 1
        missing = [name for name in ("id", "url", "body") if not event.get(name)]
        error = f"not an event: no {', '.join(missing)}" if missing else self._post(event)
        pipe = self.server.pipeline(transaction=True)
        pipe.xack(self.stream, GROUP, entry_id)
        pipe.xdel(self.stream, entry_id)
        if error is None:
            self.delivered += 1
            logger.debug("%s %s delivered to %s", event.get("type"), event["id"], event["url"])
        elif attempt > self.retries or missing:
            self.failed += 1
            self.dead_count += 1
            logger.error(
                "%s %s not delivered to %s after %d tries (%s): kept in %s",
                event.get("type"), event.get("id"), event.get("url"), attempt, error, self.dead,
            )  # fmt: skip
            record = {**event, "attempts": attempt, "error": error, "time": clock.now()}
            record.pop("attempt", None)
            pipe.lpush(self.dead, json.dumps(record))
        else:
            self.failed += 1
            due = clock.now() + delay_after(attempt)
            logger.warning(
                "%s %s to %s failed (%s); try %d in %.0f s",
                event.get("type"), event["id"], event["url"], error, attempt + 1,
                delay_after(attempt),
            )  # fmt: skip
            again = {**event, "attempt": str(attempt), "error": error}
            pipe.zadd(self.later, {json.dumps(again, sort_keys=True): int(due * 1000)})
        pipe.execute()

    def _post(self, event: dict[str, str]) -> str | None:
        """POST the event to its URL; None when delivered, else what went wrong."""
        now = dt.datetime.fromtimestamp(clock.now(), dt.UTC)
        data = event["body"].encode()
        headers = {
            "content-type": "application/json",
            "webhook-id": event["id"],
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self.signer.sign(event["id"], now, data),
        }
        if self.user_agent:
            headers["user-agent"] = self.user_agent
        request = urllib.request.Request(event["url"], data=data, headers=headers, method="POST")
        try:
            with _OPENER.open(request, timeout=self.timeout) as answer:
                answer.read(65536)
                status = answer.status
        except urllib.error.HTTPError as exc:
            return f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            return f"{type(exc).__name__}: {reason}"[:300]
        return None if 200 <= status < 300 else f"HTTP {status}"
