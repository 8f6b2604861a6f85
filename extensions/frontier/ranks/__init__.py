"""Host ranks: how many registered domains link to each host (``state``), and
what they decide in the frontier (``part``: the lease turns with
``FRONTIER_ORDER = "importance"``; ``scripts/_ranks.lua``: page budgets)."""
