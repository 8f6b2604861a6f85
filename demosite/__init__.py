"""The bundled demo shop: a deterministic site of a few thousand pages."""
