"""What the Parquet store and its frontier part share on one node: its spool
and the crawl's schema, built by whichever of the two asks first."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from extensions import connection
from extensions.cluster.checkpoint import node_id_for
from extensions.keys import SpiderKeys
from extensions.pipelines.parquet.schema import CrawlSchema
from extensions.pipelines.parquet.spool import Spool
from extensions.runtime import state_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


@dataclass
class ParquetState:
    spool: Spool
    schema: CrawlSchema
    #: NAME:parquet:files, the manifest of committed segments
    files_key: str


def parquet_state(crawler: Crawler) -> ParquetState:
    def make() -> ParquetState:
        assert crawler.spidercls is not None
        keys = SpiderKeys.for_crawler(crawler)
        spool = Spool(
            Path(crawler.settings.get("PARQUET_SPOOL_DIR")),
            crawler.spidercls.name,
            node_id_for(crawler),
        )
        spool.open()
        schema = CrawlSchema(connection.client_for(crawler), keys.named("parquet_schema"))
        return ParquetState(spool, schema, keys.named("parquet_files"))

    return state_of(crawler, ParquetState, make)
