"""A frontier bigger than Redis (``FRONTIER_OVERFLOW = "mongo"``): the requests
kept in MongoDB (``store``), moving them there and back (``spilling``), and the
frontier part that runs it on a node (``part``)."""
