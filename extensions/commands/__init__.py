"""``scrapy`` commands for the distributed crawl.

Enable with ``COMMANDS_MODULE = "extensions.commands"`` in a project's settings.
"""

# Shared pieces live in extensions/cli.py: Scrapy loads every ScrapyCommand
# subclass defined in this package as a command.
