"""Built-in clusterers ``fcm`` and ``efcm`` with edit-constrained centres (issue 3)."""
