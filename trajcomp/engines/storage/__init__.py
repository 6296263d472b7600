"""Object storage: URIs, fetching inputs into a stage, putting outputs and mirroring the work folder."""
