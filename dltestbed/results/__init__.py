"""Run records and the local results store (the source of truth)."""

# --results' help, where it is given: no word longer than a narrow help column (rich cuts one with "…"): the
# folder, not the whole path
RESULTS_HELP = "Results store: $DLTESTBED_RESULTS, else results.sqlite in ~/.local/share/dltestbed/."
RESULTS_SHORT = "Results store ($DLTESTBED_RESULTS)."
