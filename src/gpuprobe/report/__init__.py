"""Show results: the terminal (rich), notebooks (HTML tables), plots and HTML reports."""
