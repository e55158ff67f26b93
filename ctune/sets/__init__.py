"""Problem sets: one search per shape of a set (``problem_set``), the finalists measured
across shapes, then the fewest builds that serve every shape (``dispatch``) and the table
that picks one per shape (``dispatch_table``). Built on the single-kernel search
(``ctune.search``), which never imports this package."""
