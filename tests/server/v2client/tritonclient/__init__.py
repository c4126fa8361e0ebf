"""A stand-in for the part of Triton's Python client (`tritonclient.http`) that attnd's tests and
README use; see http/__init__.py. The real package is on PyPI, which these machines cannot reach.
"""
