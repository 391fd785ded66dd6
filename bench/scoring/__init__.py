"""Scoring: the metrics a task is scored with (cosine scores, correlations, alignment, uniformity) and the
statistics behind every interval and test (bootstrap, Wilson, t-interval, paired tests). numpy and scipy only."""
