"""``search_documents`` (``scrapy mcp``): the documents of the API's crawls still
held in Redis (``NAME:api:results:ID``, kept API_RESULTS_TTL after a crawl), the
ones that hold the most of the query's words first. One crawl's with its id;
else the newest crawls', reading at most SEARCH_READ documents a call, so that
a call's cost is bounded whatever the cluster holds."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from extensions.api.jobs import BadCall

if TYPE_CHECKING:
    from extensions.api.jobs import Jobs

#: documents one search reads at most
SEARCH_READ = 20_000
#: crawls one search looks at at most (the newest)
SEARCH_CRAWLS = 1_000
#: documents read from Redis at a time
BATCH = 200
#: words of a query looked for at most
MAX_TERMS = 20
SNIPPET = 240


def _terms(query: Any) -> list[str]:
    if not isinstance(query, str):
        raise BadCall("query: must be a string")
    terms = list(dict.fromkeys(re.findall(r"\w+", query.lower())))[:MAX_TERMS]
    if not terms:
        raise BadCall("query: give a word to look for")
    return terms


def _newest_crawls(jobs: Jobs) -> list[str]:
    found = []
    for crawl, raw in jobs.server.hscan_iter(jobs.jobs_key, count=500):
        try:
            record = json.loads(raw)
            if record.get("kind") == "crawl":
                name = crawl.decode() if isinstance(crawl, bytes) else str(crawl)
                found.append((float(record.get("created") or 0), name))
        except (ValueError, TypeError, AttributeError):
            continue  # not a record scrapy api wrote
    return [crawl for _, crawl in sorted(found, reverse=True)[:SEARCH_CRAWLS]]


def _scored(document: dict[str, Any], terms: list[str]) -> tuple[int, int, str] | None:
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    title = str(metadata.get("title") or "").lower()
    text = str(document.get("markdown") or "").lower()
    matched = [t for t in terms if t in title or t in text]
    if not matched:
        return None
    weight = sum(5 * title.count(t) + text.count(t) for t in matched)
    at = text.find(matched[0])
    start = max(at - SNIPPET // 3, 0)
    return len(matched), weight, str(document.get("markdown") or "")[start : start + SNIPPET]


def search_documents(jobs: Jobs, query: Any, crawl: str | None, limit: int) -> dict[str, Any]:
    terms = _terms(query)
    if crawl is not None and jobs.job(crawl) is None:
        raise BadCall(f"crawl_id: no crawl {crawl[:80]!r}")
    crawls = [crawl] if crawl is not None else _newest_crawls(jobs)
    hits: list[tuple[int, int, dict[str, Any]]] = []
    read = 0
    for name in crawls:
        start = 0
        while read < SEARCH_READ:
            batch = jobs.results(name, start, min(BATCH, SEARCH_READ - read))
            if not batch:
                break
            start += len(batch)
            read += len(batch)
            for document in batch:
                scored = _scored(document, terms) if isinstance(document, dict) else None
                if scored is None:
                    continue
                metadata = document.get("metadata") or {}
                hits.append((scored[0], scored[1], {
                    "url": metadata.get("sourceURL") or metadata.get("url"),
                    "title": metadata.get("title"), "crawl_id": name, "snippet": scored[2],
                }))  # fmt: skip
        if read >= SEARCH_READ:
            break
    hits.sort(key=lambda hit: (hit[0], hit[1]), reverse=True)
    return {"results": [hit[2] for hit in hits[:limit]], "documents_read": read,
            "cut_short": read >= SEARCH_READ}  # fmt: skip
