"""The version of chash, in one place: the package and the command read it here."""

__version__ = "0.1.0"
