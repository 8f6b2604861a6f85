"""Pay-per-crawl: a page a site prices (``402`` with ``crawler-price``) paid
within a per-page maximum and a per-crawl budget, signed, and the crawl's ledger
in Redis."""
