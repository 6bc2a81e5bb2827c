"""prefixkit.linter: static checks for content that breaks prompt caching."""
