"""The tier model and the tiered replay behind `prefixkit analyze --tiers`."""
