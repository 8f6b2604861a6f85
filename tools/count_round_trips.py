"""Run a ``scrapy`` command with the Redis round trips it makes counted.

``python -m tools.count_round_trips crawl SPIDER ...`` behaves like
``scrapy crawl SPIDER ...``, and at exit writes to ``$ROUND_TRIPS_FILE``
``{"reactor": N, "other": M}``: how many times redis-py sent something and
waited for the answer, on the main (reactor) thread and on any other thread.
One call of ``send_packed_command`` is one round trip: a single command, a
whole pipeline or MULTI block, a script call, or a health-check PING.

Used by ``make bench`` to compare stock scrapy-redis with this project from the
client's side; the server's ``INFO commandstats`` cannot tell a pipeline of
fifty commands from fifty separate requests.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading

import redis.connection

counts = {"reactor": 0, "other": 0}
_lock = threading.Lock()
_send = redis.connection.AbstractConnection.send_packed_command


def _counting_send(self, command, check_health=True):
    thread = "reactor" if threading.current_thread() is threading.main_thread() else "other"
    with _lock:
        counts[thread] += 1
    return _send(self, command, check_health)


def _write_counts() -> None:
    path = os.environ.get("ROUND_TRIPS_FILE")
    if path:
        with open(path, "w") as out:
            json.dump(counts, out)


def main() -> None:
    redis.connection.AbstractConnection.send_packed_command = _counting_send
    atexit.register(_write_counts)
    from scrapy.cmdline import execute

    execute(["scrapy", *sys.argv[1:]])


if __name__ == "__main__":
    main()
