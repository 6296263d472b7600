"""Buying summaries: the summary cache, and summaries bought in batch rounds or through batch files."""
