"""``scrapy scope``: the scope capability's command (``extensions/scope/command.py``)."""

from extensions.scope.command import ScopeCommand


class Command(ScopeCommand):  # Scrapy finds a command defined in its own module
    pass
