"""``make console``: the web console on a live demo crawl, until Ctrl-C.

Starts an embedded Redis (or uses ``REDIS_URL``), the demo shop, two crawler
nodes held to a slow pace (``CONSOLE_DEMO_RATE`` requests per second for the
shop, so there is a crawl to watch for minutes), seeds the shop with a crawl id
of its own, and serves the console on ``CONSOLE_PORT`` (6880) on 127.0.0.1.
Everything it started is stopped on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from servers import services

WORK = Path(os.environ.get("DEMO_DIR") or services.ROOT / "data" / "console-demo").resolve()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("CONSOLE_PORT", 6880)))
    args = parser.parse_args()
    rate = os.environ.get("CONSOLE_DEMO_RATE", "8")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stopped as by Ctrl-C
    started: list[services.Service] = []
    nodes: list[subprocess.Popen] = []
    try:
        redis_url, site = services.demo_servers(WORK, started)
        settings = {"CLUSTER_HOST_RATE": rate, "MAX_IDLE_TIME_BEFORE_CLOSE": 0,
                    "ITEMS_DIR": WORK / "items", "LOG_LEVEL": "INFO"}  # fmt: skip
        for n in (1, 2):
            log = WORK / f"node-{n}.log"
            nodes.append(services.start_node("shop", redis_url, log=log, settings=settings))
            print(f"Node       node {n} (log: {log})")
        crawl = "demo-" + time.strftime("%H%M%S")
        seeded = subprocess.run(
            [sys.executable, "-m", "scrapy", "seed", "shop", "--crawl", crawl, site.url + "/",
             site.url + "/flaky/500/1", site.url + "/flaky/500/2",
             "-s", f"REDIS_URL={redis_url}"],
            cwd=services.ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        print(f"Seed       {seeded.stdout.strip() or seeded.stderr.strip()}")
        console = services.start_console(redis_url, log=WORK / "console.log", port=args.port)
        started.append(console)
        print(f"\nConsole    {console.url}/   (Ctrl-C stops everything)")
        while console.proc.poll() is None:
            time.sleep(1)
        return 1
    except KeyboardInterrupt:
        print("\nstopping ...")
        return 0
    finally:
        services.stop_all(nodes, started)


if __name__ == "__main__":
    sys.exit(main())
