"""Items in bulk, off the reactor: the pipeline (``itemstore``), the store
protocol and JSON Lines (``stores``), MongoDB (``mongo``), the Redis stream
(``stream``), which stores (``choice``, ``declared``), item checks (``documents``).

``extensions.pipelines.ItemStorePipeline`` stays importable from here.
"""

from typing import Any

__all__ = ["ItemStorePipeline"]


def __getattr__(name: str) -> Any:
    # lazily: the settings' defaults load ``declared`` from this package
    if name == "ItemStorePipeline":
        from extensions.pipelines.itemstore import ItemStorePipeline

        return ItemStorePipeline
    raise AttributeError(name)
