"""Built-in clusterer ``idp-kmeans``: the DP k-means baseline (issue 4)."""
