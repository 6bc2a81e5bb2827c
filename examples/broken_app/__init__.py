"""A deliberately broken copy of `support_app`: every classic cache breaker (for `make demo`)."""
