"""Tests of what users install and read: the import errors of a missing C
extension, the optional-import helper, and the docs' snippets run as
written; and of the suite's own CI guard.  No fixture of their own.
"""
