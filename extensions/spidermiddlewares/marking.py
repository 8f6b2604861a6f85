"""A field the stack writes on a page's items (``duplicate_of``, ``canonical``,
``_noindex``): dicts take any, an item class only the fields it declares."""

from __future__ import annotations

import logging
from typing import Any

from itemadapter import ItemAdapter
from scrapy import Request


class ItemMarker:
    """Writes fields on items; one that cannot take a field is passed on as it
    is, counted in the stat ``unmarkable`` and said once in the log."""

    def __init__(self, stats: Any, unmarkable: str, logger: logging.Logger):
        self.stats = stats
        self.unmarkable = unmarkable
        self.logger = logger
        self._unmarkable_said: set[str] = set()

    def mark(self, output: Any, field: str, value: Any, counted: str = "") -> Any:
        """``output`` with ``field`` set to ``value`` (a request goes on as it is);
        the stat ``counted`` counts the items marked."""
        if isinstance(output, Request):
            return output
        try:
            ItemAdapter(output)[field] = value
            if counted:
                self.stats.inc_value(counted)
        except (KeyError, TypeError):  # an Item or dataclass without the field
            self.stats.inc_value(self.unmarkable)
            if field not in self._unmarkable_said:
                self._unmarkable_said.add(field)
                self.logger.warning("%s has no %s field: items of its kind are stored without it",
                                    type(output).__name__, field)  # fmt: skip
        return output
