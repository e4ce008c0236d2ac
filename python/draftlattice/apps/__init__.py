"""Applications built on the library: the ``draftlattice demo`` comparison of drafters.

Programs, not library: they load shipped artifacts, pick prompts and render reports; the CLI
(``draftlattice.cli``) prints what they return.
"""
