"""Results others can read: a search's journal or an artifact as T4 (the auto-tuning
community's JSON results format, read by Kernel Tuner and KTT) and as CSV, and T4
results read back as configurations to warm-start a search."""
