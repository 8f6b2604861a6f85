"""Recrawls in a node's frontier: pages kept for a recrawl in Redis
(``revisits``), their records on their way to a status store outside Redis
(``statuses``), and the frontier part that feeds due pages back into the queue
(``part``)."""
