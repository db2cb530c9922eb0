"""Views of the experiments app, one module per area."""
