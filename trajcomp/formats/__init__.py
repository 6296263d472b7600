"""Readers and writers, streaming: a reader yields Records, a writer takes rows."""

from .base import AtomicFile, Record
from .jsonl import JsonlWriter, read_jsonl

__all__ = ["AtomicFile", "Record", "JsonlWriter", "read_jsonl", "open_reader", "open_writer", "INPUT_SUFFIXES"]

INPUT_SUFFIXES = (".jsonl",)


def open_reader(path):
    """Records of the file at `path`, chosen by its suffix."""
    return read_jsonl(path)


def open_writer(path):
    """A writer for `path`, chosen by its suffix; nothing appears at `path` until it is committed."""
    return JsonlWriter(path)
