"""Why a response makes no document."""


class NotADocument(Exception):
    """Why a response makes no document (its reason is a stat's last part:
    ``documents/skipped/REASON``)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
