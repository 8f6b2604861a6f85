"""Whether a URL's usage preferences (``extensions/usage.py``) refuse a crawl's
purpose.

A purpose is read against both ways of saying it: the IETF vocabulary's label
(``train-ai=n``; a label that says nothing takes its broader label's word, so
``bots=n`` refuses training unless ``train-ai=y`` says otherwise) and
``Content-Signal``'s name (``ai-train=no``). Either refusal refuses.
"""

from __future__ import annotations

from extensions.usage import REFUSALS, VOCABULARY

#: purpose -> (the IETF vocabulary label, the Content-Signal name) it is judged by
PURPOSES: dict[str, tuple[str, str]] = {
    "search": ("search", "search"),
    "ai-input": ("ai-use", "ai-input"),
    "ai-train": ("train-ai", "ai-train"),
}
#: what becomes of the items of a page that refuses the purpose
ENFORCE = ("drop", "flag")
#: a crawl's purpose that records preferences only (``scrapy seed --purpose none``)
NO_PURPOSE = "none"


def refusal(usage: dict[str, str], purpose: str) -> str | None:
    """The statement that refuses ``purpose`` (``train-ai=n``), or None."""
    label, signal = PURPOSES[purpose]
    name: str | None = label
    while name is not None:  # the narrowest label that says something decides
        value = usage.get(name)
        if value is not None:
            if value in REFUSALS:
                return f"{name}={value}"
            break
        name = VOCABULARY[name]
    value = usage.get(signal)
    if value is not None and value in REFUSALS:
        return f"{signal}={value}"
    return None


def purpose_problem(value: object) -> str | None:
    if value in ("", None) or value in PURPOSES:
        return None
    return f"{value!r:.40} is no purpose: one of {', '.join(PURPOSES)} (or empty: record only)"
