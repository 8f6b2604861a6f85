"""Talking to scrapyd nodes: schedule a spider on each, list and cancel its jobs.

Nodes come from ``--nodes``, else the ``SCRAPYD_NODES`` setting or environment
variable (comma separated URLs). Credentials may sit in a URL
(``http://user:pass@host:6800``) or in ``SCRAPYD_USERNAME`` / ``SCRAPYD_PASSWORD``;
they never appear in what is printed.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extensions.connection import mask_url

# seconds per HTTP call to a scrapyd node: schedule.json starts a process that lists the
# project's spiders, which a busy node took more than 15 s to answer
TIMEOUT = 60.0


class ScrapydError(RuntimeError):
    """A node refused or could not be reached; the message says which and why."""


def node_urls(option: str | None, settings, environ: Mapping[str, str] | None = None) -> list[str]:
    env: Mapping[str, str] = os.environ if environ is None else environ
    if option:
        raw = option.split(",")
    else:
        raw = settings.getlist("SCRAPYD_NODES") or env.get("SCRAPYD_NODES", "").split(",")
    return [url.strip().rstrip("/") for url in raw if url.strip()]


@dataclass
class ScrapydNode:
    url: str
    username: str = ""
    password: str = ""

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ScrapydError(f"not a scrapyd URL: {mask_url(self.url)}")
        if parts.username:
            self.username = urllib.parse.unquote(parts.username)
            self.password = urllib.parse.unquote(parts.password or "")
            netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
            self.url = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    @property
    def label(self) -> str:
        return self.url

    def call(self, endpoint: str, data: list[tuple[str, str]] | None = None) -> dict[str, Any]:
        url = f"{self.url}/{endpoint}"
        body = None
        if data is not None:
            body = urllib.parse.urlencode(data).encode()
        request = urllib.request.Request(url, data=body)
        if self.username:
            token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as exc:
            reason = "wrong or missing credentials" if exc.code == 401 else exc.reason
            raise ScrapydError(f"{self.label}: HTTP {exc.code} ({reason})") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ScrapydError(f"{self.label}: unreachable ({exc})") from None
        if answer.get("status") != "ok":
            raise ScrapydError(f"{self.label}: {answer.get('message', answer)}")
        return answer

    def schedule(self, project: str, spider: str, settings: list[str], args: dict[str, str]) -> str:
        data = [("project", project), ("spider", spider)]
        data += [("setting", setting) for setting in settings]
        data += list(args.items())
        return self.call("schedule.json", data)["jobid"]

    def jobs(self, project: str, spider: str) -> list[str]:
        query = urllib.parse.urlencode({"project": project})
        answer = self.call(f"listjobs.json?{query}")
        return [
            job["id"]
            for state in ("pending", "running")
            for job in answer.get(state, [])
            if job.get("spider") == spider
        ]

    def cancel(self, project: str, job: str) -> str:
        return self.call("cancel.json", [("project", project), ("job", job)]).get("prevstate", "")


def make_nodes(
    urls: list[str], settings, environ: Mapping[str, str] | None = None
) -> list[ScrapydNode]:
    env: Mapping[str, str] = os.environ if environ is None else environ
    username = settings.get("SCRAPYD_USERNAME") or env.get("SCRAPYD_USERNAME", "")
    password = settings.get("SCRAPYD_PASSWORD") or env.get("SCRAPYD_PASSWORD", "")
    return [ScrapydNode(url, username, password) for url in urls]
