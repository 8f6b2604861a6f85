"""A crawl that says what it gathers for (``CRAWL_PURPOSE``, or a crawl id's
``scrapy seed --purpose``), and leaves out what the sites refuse it."""
