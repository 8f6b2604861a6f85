"""What a person sees of a crawl: ``scrapy status`` snapshots and Prometheus metrics."""
