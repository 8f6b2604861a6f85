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
