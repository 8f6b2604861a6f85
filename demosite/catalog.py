"""The demo shop's content, computed from fixed seeds: the same on every run."""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache

CATEGORIES = [
    "books", "garden", "kitchen", "music", "outdoor", "toys",
    "tools", "games", "office", "sports", "travel", "audio",
]  # fmt: skip
PER_PAGE = 20
ADJECTIVES = ["Red", "Quiet", "Swift", "Tiny", "Grand", "Bright", "Smooth", "Solid", "Lucky"]
NOUNS = ["Lamp", "Kettle", "Guitar", "Tent", "Puzzle", "Hammer", "Notebook", "Ball", "Map"]


@dataclass(frozen=True)
class Product:
    id: int
    category: str
    name: str
    sku: str
    price_cents: int
    rating: float
    in_stock: bool
    related: tuple[int, ...]


@cache
def category_sizes() -> dict[str, int]:
    rng = random.Random(20261129)
    return {c: rng.randint(140, 200) for c in CATEGORIES}


@cache
def product_ids(category: str) -> tuple[int, ...]:
    start = 1
    for c in CATEGORIES:
        if c == category:
            return tuple(range(start, start + category_sizes()[c]))
        start += category_sizes()[c]
    raise KeyError(category)


def total_products(categories: int | None = None) -> int:
    """The products of the shop, or of a shop of its first ``categories``."""
    return sum(category_sizes()[c] for c in CATEGORIES[:categories])


def pages_in(category: str) -> int:
    return -(-len(product_ids(category)) // PER_PAGE)


@cache
def product(product_id: int) -> Product | None:
    if not 1 <= product_id <= total_products():
        return None
    category = next(c for c in CATEGORIES if product_id in product_ids(c))
    rng = random.Random(product_id)
    ids = product_ids(category)
    return Product(
        id=product_id,
        category=category,
        name=f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} {product_id}",
        sku=f"SKU-{product_id:06d}",
        price_cents=rng.randint(199, 99999),
        rating=round(rng.uniform(1, 5), 1),
        in_stock=rng.random() > 0.2,
        related=tuple(rng.choice(ids) for _ in range(3)),
    )


def expected_pages(categories: int | None = None) -> set[str]:
    """Every path a crawler that obeys robots.txt reaches from ``/`` (in a shop
    of the first ``categories``: the others' products are never linked)."""
    paths = {"/", "/about"}
    for c in CATEGORIES[:categories]:
        paths.add(f"/category/{c}")
        paths.update(f"/category/{c}?page={n}" for n in range(2, pages_in(c) + 1))
    paths.update(f"/product/{i}" for i in range(1, total_products(categories) + 1))
    return paths
