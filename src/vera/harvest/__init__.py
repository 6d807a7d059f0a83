"""`vera harvest`: what a repository's files state, as facts with line-exact evidence.

Runs on the developer's machine (the client side): ``git`` reads a commit from the object
database, ``extractors`` (one module per family of files) turn each file into facts,
``harvester`` attaches and screens their evidence. docs/harvest.md is the reference.
"""
