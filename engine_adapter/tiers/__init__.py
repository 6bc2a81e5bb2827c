"""KV cache tiers (GPU -> host RAM -> disk): the tier model and the tiered replay behind
``prefixkit analyze --tiers``.

* `kv_layout`: KV bytes per token from a model's ``config.json``;
* `hardware`: GPU and link defaults with their sources, sizes and rates with units;
* `fetch`: what a hit in each tier saves of a block's prefill (fetch or recompute);
* `simulate`: the replay through per-replica LRU tiers;
* `sweep`: replays over tier sizes, and where more memory stops paying.

Pure functions and plain data; the command line reads files and prints.
"""
