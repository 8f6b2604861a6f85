"""Hosts that push back, as real sites do (``--pushback MODE`` of the demo site).

* ``overload:RATE``: more than RATE requests in the last second are answered
  503, without Retry-After: a server that can serve RATE a second;
* ``throttle:RATE:SECONDS``: above RATE a second, 429 with ``Retry-After:
  SECONDS``, and every request in that window is answered 429 too;
* ``ban:RATE:SECONDS``: a client sending more than RATE a second is banned for
  SECONDS: every page is a 200 "captcha" page with a challenge form. Answering
  the challenge (``POST /__challenge`` with ``answer``) lifts the ban.

* ``broken:P503:P429:SECONDS``: a healthy host with broken pages: a share P503
  of its pages (chosen by their path) answers 503 twice, then 200; a share
  P429 answers one 429 with ``Retry-After: SECONDS``, then 200.

robots.txt and the ``/__`` paths are always served. ``GET /__pushback`` says
what was answered: ``served`` (counts of ``ok``, ``503``, ``429``,
``captcha``), ``answers`` (each answer's time and what it was),
``inside_window`` (requests that arrived inside a Retry-After window the host
had announced, GRACE seconds after it began: what was already on the wire by
then is not counted), ``windows`` and ``solved``.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter, deque

from aiohttp import web

GRACE = 0.25  # seconds after a 429 before a request is "inside" its window
# seconds between the looks that tell when the server's own loop went round: a
# request it handles late (a busy loop) may have arrived as early as the round
# before, and the time the server spent busy is not the crawler's
LOOP_TICK = 0.005
CHALLENGE_QUESTION = (17, 25)  # what the captcha page asks: 17 + 25
CHALLENGE_PAGE = (
    "<!DOCTYPE html><html><head><title>Attention required</title></head><body>"
    "<h1>Please complete the captcha to continue</h1>"
    "<form method='post' action='/__challenge'>"
    "<label>What is <span class='a'>{a}</span> + <span class='b'>{b}</span>?</label>"
    "<input name='answer'><button>Verify you are human</button></form></body></html>"
)


class Pushback:
    def __init__(self, mode: str):
        kind, _, rest = mode.partition(":")
        parts = [float(p) for p in rest.split(":") if p]
        if kind not in ("overload", "throttle", "ban", "broken") or not parts:
            raise ValueError(
                f"--pushback {mode!r}: overload:RATE, throttle:RATE:S, ban:RATE:S "
                "or broken:P503:P429:S"
            )
        self.kind = kind
        self.rate = parts[0]
        self.seconds = parts[1] if len(parts) > 1 else 5.0
        self.arrivals: deque[float] = deque()
        self.until = 0.0  # end of the current Retry-After window or ban
        self.windows: list[tuple[float, float]] = []
        self.served: Counter[str] = Counter()
        self.answers: list[tuple[float, str]] = []
        self.inside = 0
        self.solved = 0
        if kind == "broken":
            self.p503, self.p429 = parts[0], parts[1] if len(parts) > 1 else 0.0
            self.seconds = parts[2] if len(parts) > 2 else 2.0
        self.refusals_left: dict[str, list[str]] = {}  # broken: path -> answers to come
        self.rounds: deque[float] = deque(maxlen=2)  # the loop's last two rounds

    async def watch_loop(self, app: web.Application) -> None:
        async def tick() -> None:
            while True:
                self.rounds.append(time.time())
                await asyncio.sleep(LOOP_TICK)

        app["pushback_loop_watch"] = asyncio.ensure_future(tick())

    def arrived(self, now: float) -> float:
        """When a request handled ``now`` reached the server, at the earliest: the
        loop's round before the last (the data may have come in during that one)."""
        return min(now, self.rounds[0]) if self.rounds else now

    def over_rate(self, now: float) -> bool:
        self.arrivals.append(now)
        while self.arrivals and now - self.arrivals[0] >= 1.0:
            self.arrivals.popleft()
        return len(self.arrivals) > self.rate

    @web.middleware
    async def middleware(self, request: web.Request, handler):
        if request.path.startswith("/__") or request.path == "/robots.txt":
            return await handler(request)
        now = time.time()
        answer = self.answer(request, now)
        self.served[answer] += 1
        self.answers.append((now, answer))
        if answer == "503":
            return web.Response(status=503, text="overloaded, try later")
        if answer == "429":
            return self._too_many(self.until - now)
        if answer == "captcha":
            a, b = CHALLENGE_QUESTION
            return web.Response(text=CHALLENGE_PAGE.format(a=a, b=b), content_type="text/html")
        return await handler(request)

    def broken(self, path: str) -> list[str]:
        """What a page of a ``broken`` host answers before its 200."""
        share = int.from_bytes(hashlib.sha1(path.encode()).digest()[:4], "big") / 2**32
        if share < self.p503:
            return ["503", "503"]
        return ["429"] if share < self.p503 + self.p429 else []

    def answer(self, request: web.Request, now: float) -> str:
        if self.kind == "broken":
            if self.windows and self.windows[-1][0] + GRACE <= self.arrived(now) < self.until:
                self.inside += 1  # sent while a 429 it answered asked to wait
            left = self.refusals_left.setdefault(request.path_qs, self.broken(request.path_qs))
            if left and left[0] == "429":
                self.until = now + self.seconds
                self.windows.append((now, self.until))
            return left.pop(0) if left else "ok"
        busy = self.over_rate(now)
        if self.kind == "overload":
            return "503" if busy else "ok"
        if self.kind == "throttle":
            if now < self.until:
                if self.arrived(now) >= self.windows[-1][0] + GRACE:
                    self.inside += 1
                return "429"
            if busy:
                self.until = now + self.seconds
                self.windows.append((now, self.until))
                return "429"
            return "ok"
        if busy and now >= self.until:  # ban
            self.until = now + self.seconds
            self.windows.append((now, self.until))
        return "captcha" if now < self.until else "ok"

    @staticmethod
    def _too_many(seconds: float) -> web.Response:
        return web.Response(
            status=429, text="slow down", headers={"Retry-After": str(max(int(seconds + 0.999), 1))}
        )

    async def challenge(self, request: web.Request) -> web.Response:
        form = await request.post()
        if str(form.get("answer", "")).strip() != str(sum(CHALLENGE_QUESTION)):
            return web.Response(status=403, text="wrong answer")
        self.until = 0.0
        self.solved += 1
        return web.Response(text="thank you")

    async def report(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "served": dict(self.served),
                "answers": self.answers,
                "inside_window": self.inside,
                "windows": self.windows,
                "solved": self.solved,
            }
        )


def install(app: web.Application, mode: str) -> None:
    pushback = Pushback(mode)
    # after the hit counter: /__hits and /__times count every request that
    # reached the host, refused or not
    app.middlewares.insert(1, pushback.middleware)
    app.router.add_post("/__challenge", pushback.challenge)
    app.router.add_get("/__pushback", pushback.report)
    app.on_startup.append(pushback.watch_loop)
