"""WARC capture (WARC_ENABLED): each fetch's request, response and metadata in
WARC/1.1 files (``files``), written as responses come off the wire
(``middleware``) and on disk before their leases are released (``part``)."""
