"""Errors raised by the data layer."""


class DataError(Exception):
    """A data file could not be obtained or read: the message names the file and how to fix it."""


class ChecksumError(DataError):
    """A file's size or sha256 is not the one the registry records (corrupted or truncated)."""
