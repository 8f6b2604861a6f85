"""``python -m tests.small_disk crawl SPIDER ...``: ``scrapy crawl`` in a process
that may write no file past 256 kB (RLIMIT_FSIZE). A write past it fails with
EFBIG, through the same calls a full disk fails with ENOSPC (Python ignores
SIGXFSZ); filling a real file system would take root and a mount."""

from __future__ import annotations

import resource
import sys

from scrapy.cmdline import execute

LIMIT = 256_000

if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))
    sys.exit(execute())
