"""Items the project's spiders produce (itemadapter-compatible dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PageItem:
    """One HTML page fetched by the generic ``site`` spider."""

    url: str
    status: int
    title: str | None
    fetched_at: str
    depth: int
    referer: str | None
    duplicate_of: str | None = None  # CONTENT_DUPLICATES = "mark": the URL it repeats
    near_duplicate_of: str | None = None  # CONTENT_NEAR_DUPLICATES = "mark": the page
    # it nearly repeats
    canonical: str | None = None  # the other URL its rel="canonical" names
    _usage: dict[str, str] | None = None  # what its site says of its use (Content-Signal)


@dataclass
class ProductItem:
    """One product of the demo shop, typed."""

    url: str
    product_id: int
    sku: str
    name: str
    price: float
    currency: str
    rating: float
    in_stock: bool
    category: str
    fetched_at: str


@dataclass
class RenderedItem:
    """One page of the demo site's JavaScript shop, as the browser built it."""

    url: str
    title: str | None
    price: str | None
    links: int  # item links on the page (the endless list: all it loaded)
    rows: int  # table rows (the data page: loaded by fetch)
    rendered: bool  # fetched with a browser
