# reliability.mk - fuzzing, sanitizers, limits, overload and fault tests (issue: reliability and
# security), included by the top-level Makefile.
#
#   make fuzz, fuzz-ci, fuzz-replay   see tests/fuzz/fuzz.mk

include tests/fuzz/fuzz.mk
