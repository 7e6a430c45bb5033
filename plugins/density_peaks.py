"""Built-in density-peak clusterers: dpc, addpc, dp-dpcl and the baselines (issue 4)."""
