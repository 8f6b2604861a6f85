"""The render lane in a node's frontier (``part``): which requests go to it, how
many a render node leases, and what a node that cannot render waits for."""
