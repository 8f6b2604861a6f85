"""Items in bulk, off the reactor: the pipeline (``itemstore``), the store
protocol and JSON Lines (``stores``), MongoDB (``mongo``), item checks
(``documents``).

``extensions.pipelines.ItemStorePipeline`` stays importable from here.
"""

from extensions.pipelines.itemstore import ItemStorePipeline

__all__ = ["ItemStorePipeline"]
