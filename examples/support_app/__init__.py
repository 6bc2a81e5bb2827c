"""A small multi-tenant support assistant built the static-first way (used by `make demo`)."""
