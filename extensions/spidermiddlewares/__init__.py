"""Spider middlewares: at most ``MAX_LINKS_PER_PAGE`` requests per response."""
