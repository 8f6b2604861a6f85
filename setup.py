"""The egg scrapyd-deploy uploads: the crawler project and its extensions.

Settings that differ per environment (REDIS_URL, MONGO_URI, credentials) are
read from the environment at run time, never baked into the egg.
"""

import re
from pathlib import Path

from setuptools import find_packages, setup

VERSION = re.search(
    r'__version__ = "([^"]+)"', (Path(__file__).parent / "extensions" / "__init__.py").read_text()
)[1]

setup(
    name="crawler",
    version=VERSION,
    packages=find_packages(include=["crawler", "crawler.*", "extensions", "extensions.*"]),
    package_data={
        "": ["*.lua"],  # the core's scripts and every part's pieces, in their packages
        "extensions.console": ["templates/*.html", "static/*.*", "static/vendor/*/*"],
    },
    entry_points={"scrapy": ["settings = crawler.settings"]},
    zip_safe=True,
)
