"""The `draftlattice` command line interface."""
