"""The web console (``scrapy console``): the cluster's crawls, hosts, nodes and
dead letters in a browser, live, with the actions a person takes on them.

``readers`` reads Redis (a bounded number of commands per view, whatever the
crawl's size), ``actions`` changes it and keeps the audit log, ``auth`` holds
users, sessions and CSRF tokens, ``app`` serves pages and the JSON API.
"""
