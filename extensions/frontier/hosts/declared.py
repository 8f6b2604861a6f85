"""Politeness by registered domain and by server address, declared
(``extensions/capability.py``): their rates and the frontier part that keeps
them (``levels.py``). (The levels' keys are read by the core lease itself:
``keys.py``.)"""

from __future__ import annotations

from extensions.capability import Capability, Setting
from extensions.settingchecks import number

CAPABILITY = Capability(
    name="levels",
    about="politeness by registered domain and server address (extensions/frontier/hosts/)",
    settings={
        "CLUSTER_DOMAIN_RATE": Setting(
            0.0,
            "requests per second per registered domain (its hosts together) for the whole "
            "cluster; 0 = no limit (sharded: hosts/claims.py)",
            number(float, 0),
        ),
        "CLUSTER_IP_RATE": Setting(
            0.0,
            "requests per second per server address (IPv4 or IPv6; DNS_SHARED is then on "
            "unless set) for the whole cluster; 0 = no limit",
            number(float, 0),
        ),
    },
    frontier_parts={"extensions.frontier.hosts.levels.HostLevels": 500},
)
