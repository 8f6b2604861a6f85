"""Run one scrapyd node in the foreground on 127.0.0.1 (``make scrapyd PORT=6800``).

Its state lives in ``data/scrapyd-PORT``; the login is SCRAPYD_USERNAME
(default ``crawler``) / SCRAPYD_PASSWORD from the environment. There is no
default password: scrapyd runs whatever egg it is sent, so it refuses to start
without one. The generated ``scrapyd.conf`` is readable by its owner alone.
Jobs inherit this process's environment, so REDIS_URL and MONGO_URI set here
reach them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from servers import services


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=6800)
    args = parser.parse_args()
    password = os.environ.get("SCRAPYD_PASSWORD", "")
    if not password:
        sys.exit(
            "error: set SCRAPYD_PASSWORD (and SCRAPYD_USERNAME, default crawler): scrapyd "
            "runs any egg it is sent, so it never runs without a login"
        )
    workdir = services.ROOT / "data" / f"scrapyd-{args.port}"
    workdir.mkdir(parents=True, exist_ok=True)
    services.write_scrapyd_conf(
        workdir,
        port=args.port,
        username=os.environ.get("SCRAPYD_USERNAME", "crawler") or "crawler",
        password=password,
    )
    binary = shutil.which("scrapyd") or str(Path(sys.executable).parent / "scrapyd")
    print(f"scrapyd on http://127.0.0.1:{args.port} (state in {workdir}); Ctrl-C stops it")
    os.chdir(workdir)
    os.execv(binary, [binary])


if __name__ == "__main__":
    main()
