"""Item pipelines used only by the tests."""

import asyncio
import collections


class WaitingPipeline:
    """Waits on each item, as a pipeline that calls an API would, and counts the
    most items of one page it held at once (``test/items_held_at_once``:
    CONCURRENT_ITEMS is a limit per response)."""

    def __init__(self, crawler):
        self.stats = crawler.stats
        self.held = collections.Counter()

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    async def process_item(self, item):
        page = item["url"].split("?")[0]
        self.held[page] += 1
        self.stats.max_value("test/items_held_at_once", self.held[page])
        try:
            await asyncio.sleep(0.05)
        finally:
            self.held[page] -= 1
        return item
