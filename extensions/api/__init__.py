"""An API the tools of the field already speak: Firecrawl's v2 scrape and crawl
endpoints, served by ``scrapy api`` over the cluster's own crawls."""
