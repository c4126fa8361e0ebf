# reliability.mk - fuzzing, sanitizers, limits, overload and fault tests (issue: reliability and
# security), included by the top-level Makefile.
