"""Built-in clusterer ``mdav``: the crisp k-anonymous baseline (issue 3)."""
