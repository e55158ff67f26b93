"""The CI verbs that build and measure an artifact again: ``check`` (is it stale?), ``gate``
(has it regressed?), ``registry refresh`` (record today's inputs of one still valid) and
``registry retune`` (the search that made a stale one). They read and write artifacts
through ``ctune.registry``, which is storage only and never imports them."""
