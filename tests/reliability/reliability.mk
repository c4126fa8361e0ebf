# reliability.mk - fuzzing, sanitizers, limits, overload and fault tests (issue: reliability and
# security), included by the top-level Makefile.
#
#   make test-reliability  (part of `make test`, about 12 s) test_reliability against a live
#                          daemon: limits, faults, slow clients, RSS over 20 000 requests; and
#                          the fuzzers' regression inputs (fuzz-replay)
#   make fuzz, fuzz-ci, fuzz-replay   see tests/fuzz/fuzz.mk

REL_DIR := $(BUILD)/tests/reliability

$(BUILD)/tests/test_reliability: $(BUILD)/tests/reliability/test_reliability.o
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ -lcurl -lpthread

.PHONY: test-reliability
test-reliability: $(BUILD)/attnd $(BUILD)/tests/test_reliability fuzz-replay
	@mkdir -p $(REL_DIR)
	timeout -k 10 300 $(BUILD)/tests/test_reliability --attnd $(BUILD)/attnd --work $(REL_DIR)

include tests/fuzz/fuzz.mk
