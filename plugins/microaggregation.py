"""Built-in maskers ``fuzzy-microaggregation`` and ``microaggregation`` (issue 3)."""
