"""Parts and resume: a part's rows and files, checkpoints, manifests, the failure streak, and parts moved by workers, actors and object storage."""
