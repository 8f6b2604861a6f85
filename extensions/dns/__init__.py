"""DNS shared by the cluster (``DNS_SHARED``)."""
