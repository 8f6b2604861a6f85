"""Documents for search and language models: a page's main content as markdown
and text, its metadata and structured data, cut into chunks
(``DOCUMENTS_ENABLED``; ``DistributedSpider.document(response)`` for any spider)."""
