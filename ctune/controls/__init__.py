"""Advanced-controls files (``--apply-controls``, CUDA 13.3+) as a searchable gene.

``store``: controls files by content (a search's and the registry's folders). ``engine``:
the ask/tell contract of an engine that proposes them (``compileiq``: NVIDIA CompileIQ's,
imported only when made). ``spaces``: where CompileIQ's search space for a compiler is.
``offer``: which of the ``acf`` genes a toolchain takes for a target, as the spec's genes.
"""
