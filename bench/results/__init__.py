"""Results: the store (one JSON cell per model, suite, task, seed and configuration, checked against the cell
schema; the leaderboards derived from the cells), the uncertainty of each row from its evidence sidecar (with
its cache), and the metadata exported beside the results for reports."""
