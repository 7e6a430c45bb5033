"""Built-in constraint handler ``linear``: edit rules over named columns (issue 3)."""
