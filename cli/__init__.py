"""prefixkit command line: `prefixkit lock | lint | serve | analyze`."""
