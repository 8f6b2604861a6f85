"""The egg scrapyd-deploy uploads: the crawler project and its extensions.

Settings that differ per environment (REDIS_URL, MONGO_URI, credentials) are
read from the environment at run time, never baked into the egg.
"""

from setuptools import find_packages, setup

setup(
    name="crawler",
    version="1.0",
    packages=find_packages(include=["crawler", "crawler.*", "extensions", "extensions.*"]),
    package_data={"extensions.frontier.scripts": ["*.lua"]},
    entry_points={"scrapy": ["settings = crawler.settings"]},
    zip_safe=True,
)
