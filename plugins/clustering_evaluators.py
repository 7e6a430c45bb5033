"""Built-in evaluators of clustering quality: ARI, pair F-measure, NMI (issue 4)."""
