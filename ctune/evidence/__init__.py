"""The evidence: what a number means and when two numbers differ.

- ``stats``: quantiles with distribution-free CIs, the coefficient of
  variation, Mann-Whitney (on ``scipy.stats``);
- ``compare``: the one comparison rule, used by the search's confirmation
  and by the gate (one function, one threshold);
- ``identity``: the fingerprint of an artifact, which fields make it stale
  (hard, build, soft) and how each is probed.
"""
