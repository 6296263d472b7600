"""What every run needs, whatever moves its rows: its layout, selection, order, progress and each record's fate."""
