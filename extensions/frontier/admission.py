"""What a request must pass before a node queues it: its URL normalized
(``extensions/urlnorm``), the URL policy, its
priority and delay ranges, the node's memory of links it sent already, and
being storable as JSON. What fails is refused or dead-lettered with the reason,
never raised to the engine."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from extensions import clock
from extensions.crawlid import crawl_fields, crawl_fingerprint, crawl_id_problem
from extensions.exceptions import SerializationError
from extensions.frontier.groups import queue_group_for
from extensions.frontier.serializer import dumps_request
from extensions.meta import CRAWL_ID, DELAY_UNTIL, SEEN_ONLY, priority_problem
from extensions.urlnorm.chain import Normalizing
from extensions.urlpolicy import RefusedLog, UrlPolicy, mask_credentials

if TYPE_CHECKING:
    from scrapy import Request, Spider

    from extensions.frontier.context import AdmissionCheck, AdmissionDecider
    from extensions.frontier.sent import SentFingerprints

logger = logging.getLogger(__name__)


class Admitted(NamedTuple):
    """A request as it goes to Redis: its fingerprint ("" for dont_filter or a
    parked copy), group, priority, JSON, and when it is due if it is parked."""

    fingerprint: str | bytes
    group: str
    priority: int
    data: bytes
    due: float | None


class Admission:
    def __init__(
        self,
        url_policy: UrlPolicy,
        stats: Any,
        sent: SentFingerprints,
        dead_letter: Callable[..., None],
        *,
        queue_by: str,
        max_delay: float,
        normalize: Normalizing | None = None,
    ):
        self.url_policy = url_policy
        self.stats = stats
        self.refused = RefusedLog(stats, "frontier/refused")
        self.sent = sent
        self.dead_letter = dead_letter
        self.queue_by = queue_by
        self.max_delay = max_delay
        self.normalize = normalize
        #: the parts' checks (a problem dead-letters the request) and deciders
        #: (what they mark on it, before it is fingerprinted): context.py
        self.checks: list[AdmissionCheck] = []
        #: the parts' checks of requests built from a start entry
        self.start_checks: list[AdmissionCheck] = []
        self.deciders: list[AdmissionDecider] = []

    def admit(
        self, request: Request, spider: Spider, fingerprinter: Any, from_start_entry: bool = False
    ) -> Admitted | None:
        written = request.url  # as the spider wrote it: the link path looks it up
        if self.sent.has_request(request):
            # most links a page yields were met before: nothing is normalized,
            # checked or fingerprinted again for them
            self._count_sent_already()
            return None
        if self.normalize is not None and DELAY_UNTIL not in request.meta:
            # (a parked copy was normalized when it was first queued)
            url = self.normalize(request.url)
            if url != request.url:
                request = request.replace(url=url)
        problem = self.url_policy.problem(request.url)
        if problem is not None:
            self.refused.refused(request.url, *problem)
            if from_start_entry:  # a person pushed it: keep it where they can see why
                url = mask_credentials(request.url)[:2000]
                self.dead_letter(
                    kind="start_url",
                    url=url,
                    error=problem[1],
                    **crawl_fields(request.meta.get(CRAWL_ID)),
                )
            return None
        due = request.meta.pop(DELAY_UNTIL, None)
        invalid = priority_problem(request.priority)
        if invalid is None and due is not None:
            invalid = self._delay_problem(due)
        crawl = request.meta.get(CRAWL_ID) or ""
        if invalid is None and crawl:
            invalid = crawl_id_problem(crawl)
        for check in self.checks + self.start_checks if from_start_entry else self.checks:
            if invalid is not None:
                break
            invalid = check(request)
        if invalid is not None:
            logger.error("cannot queue %s: %s", request, invalid)
            self.stats.inc_value("frontier/invalid")
            self.dead_letter(
                kind="invalid_request",
                url=request.url,
                error=invalid,
                **crawl_fields(request.meta.get(CRAWL_ID)),
            )
            return None
        for decide in self.deciders:
            decide(request)
        fingerprint: str | bytes = ""
        if due is None and not request.dont_filter:
            fingerprint = crawl_fingerprint(fingerprinter.fingerprint(request), crawl)
            if not request.meta.get("verbatim_url"):  # its fingerprint is the URL as is
                self.sent.add_url(crawl, written)
            if not self.sent.add(fingerprint):
                self._count_sent_already()
                return None
        if request.meta.get(SEEN_ONLY):
            if not fingerprint:
                return None  # nothing to mark
            # the fingerprint alone: recorded as seen, nothing queued
            return Admitted(fingerprint, queue_group_for(request.url, request.meta, self.queue_by),
                            request.priority, b"", None)  # fmt: skip
        try:
            data = dumps_request(request, spider)
        except SerializationError as exc:
            logger.error("cannot queue %s: %s", request, exc)
            self.stats.inc_value("frontier/unserializable")
            self.dead_letter(
                kind="unserializable",
                url=request.url,
                error=str(exc),
                **crawl_fields(request.meta.get(CRAWL_ID)),
            )
            return None
        group = queue_group_for(request.url, request.meta, self.queue_by)
        return Admitted(fingerprint, group, request.priority, data, due)

    def _count_sent_already(self) -> None:
        """A duplicate of what this node sent: dropped here, counted as Scrapy counts one."""
        self.stats.inc_value("dupefilter/filtered")
        self.stats.inc_value("dupefilter/filtered_locally")

    def _delay_problem(self, due: object) -> str | None:
        if not isinstance(due, (int, float)) or isinstance(due, bool) or due != due:
            return f"delay_until {due!r:.80} is not a time"
        if due > clock.now() + self.max_delay:
            return f"delay_until is more than FRONTIER_MAX_DELAY ({self.max_delay:.0f}s) ahead"
        return None
