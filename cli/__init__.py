"""prefixkit command line: `prefixkit lock | lint | serve | analyze | warm | models`
(`prefixkit.cli.main.COMMANDS` is the list)."""
