"""What moves rows through the row core: local files, worker processes, Ray, `datasets`, the dry run."""
