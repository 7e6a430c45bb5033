"""Built-in evaluators for microdata: information loss and disclosure risk (issue 3)."""
