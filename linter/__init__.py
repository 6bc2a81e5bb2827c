"""prefixkit.linter: static checks for content that breaks prompt caching."""

from prefixkit.sdk.extras import require_extra

require_extra("lint", "prefixkit.linter (prefixkit lint)", "libcst", "pathspec")
