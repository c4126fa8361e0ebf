# reliability.mk - fuzzing, sanitizers, limits, overload and fault tests (issue: reliability and
# security), included by the top-level Makefile.
#
#   make test-reliability  (part of `make test`, about 90 s) test_reliability against a live
#                          daemon: limits, faults, slow and idle clients, HTTP framing and
#                          content codings (raw sockets), security (key, CORS, headers,
#                          default address), RSS over 20 000 requests, unsent replies
#                          (clients that never read, RSS against SECURITY.md's bound, replies
#                          reserved before compute), job memory (a W4 job after another reuses
#                          its memory; idle RSS back within 10% after it), probes
#                          (/healthz and /readyz within 500 ms beside requests that declare
#                          huge shapes in small bodies; /metrics for any number of scrapers),
#                          starve (probes within 100 ms beside clients that never read, large
#                          gzip bodies being parsed, a reply read slowly holding the budget),
#                          budget (the memory bound at the defaults and in a cgroup, unfinished
#                          gzip bodies, 503 memory_budget when bodies fill it), the start (odd
#                          files in --models refused, naming them; SIGTERM and SIGINT ending a
#                          long start); and the fuzzers' regression inputs (fuzz-replay)
#   make test-asan         every unit and integration test (test_attention, the oracle,
#                          test_api, test_server, http_oracle, test_reliability, the fuzz
#                          replays) built with clang, ASan and UBSan in $(ASAN_BUILD); any
#                          sanitizer report (errors, leaks at exit) fails it
#   make test-valgrind     test_server (main, auth), test_reliability (limits, faults, framing,
#                          security)
#                          with the daemon under valgrind memcheck: zero errors, zero bytes
#                          definitely lost (valgrind_check.sh reads every process's log)
#   make overload          overload.py: W1 with wrk far above capacity against a small queue
#                          (503 + Retry-After fast, answers right, RSS bounded, recovery at
#                          once) and the load held at a p99 bound; about a minute
#   make fuzz, fuzz-ci, fuzz-replay   see tests/fuzz/fuzz.mk

REL_DIR  := $(BUILD)/tests/reliability
REL_ONLY ?= limits,faults,slow,framing,security,rss,unsent,jobmem,probes,starve,budget,startup

# test_reliability's sources: tests/reliability/main.c and a file per scenario, sharing
# tests/reliability/reliability.h (not in $(HEADERS), so named here).
REL_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/reliability/*.c))

$(REL_OBJ): tests/reliability/reliability.h

$(BUILD)/tests/test_reliability: $(REL_OBJ) $(BUILD)/tests/harness.o
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ -lcurl -ljansson -lz -lpthread

.PHONY: test-reliability
test-reliability: $(BUILD)/attnd $(BUILD)/tests/test_reliability fuzz-replay
	@mkdir -p $(REL_DIR)
	timeout -k 10 300 $(BUILD)/tests/test_reliability --attnd $(BUILD)/attnd --work $(REL_DIR) \
	    --only $(REL_ONLY)

# ---- Sanitizers -----------------------------------------------------------------------------
# A separate build tree, so the ordinary build stays as it is. test_reliability's rss, unsent,
# jobmem and probes scenarios are left out: they measure memory and time (ASan keeps freed
# memory in quarantine, and slows everything; LeakSanitizer checks leaks at each exit instead;
# the job memory cache takes its blocks from malloc there and poisons cached ones). Reports
# go to files (log_path) as well as making the process fail: the test that ran it fails, and
# the files are checked at the end in case a report came from a process whose exit status
# nobody looked at.
ASAN_BUILD  ?= build-asan
ASAN_CC     ?= clang
ASAN_CFLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
               -fno-omit-frame-pointer
ASAN_LOGS   := $(abspath $(ASAN_BUILD))/sanitizer-logs
ASAN_ENV    := ASAN_OPTIONS=log_path=$(ASAN_LOGS)/report:detect_leaks=1:strict_string_checks=1:$\
               detect_stack_use_after_return=1:check_initialization_order=1 \
               UBSAN_OPTIONS=log_path=$(ASAN_LOGS)/report:print_stacktrace=1:halt_on_error=1

.PHONY: test-asan
test-asan: deps-test
	@rm -rf $(ASAN_LOGS) && mkdir -p $(ASAN_LOGS)
	$(ASAN_ENV) $(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) CC=$(ASAN_CC) \
	    CFLAGS='$(ASAN_CFLAGS)' REL_ONLY=limits,faults,slow,framing,security \
	    test-core test-api-unit test-server test-reliability
	@if [ -n "$$(ls -A $(ASAN_LOGS))" ]; then \
	  echo "test-asan: sanitizer reports in $(ASAN_LOGS):"; head -50 $(ASAN_LOGS)/*; exit 1; fi
	@echo "test-asan: no sanitizer report"

# ---- Valgrind ---------------------------------------------------------------------------------
# The tests start $(VG_DIR)/attnd, a script that runs the daemon under memcheck; its exit status
# is 99 on any error or definite leak (so a test that expects 0 after SIGTERM fails), and
# valgrind_check.sh reads every log at the end. VG_SCALE stretches the tests' time bounds.
# ATTND_BLAS_CORETYPE=keep: no re-execution for the BLAS kernel (valgrind's CPU is not the
# machine's), so the process valgrind watches is the one that serves.
VG_DIR   := $(BUILD)/valgrind
VG_SCALE ?= 20
VG_FLAGS := --tool=memcheck --leak-check=full --show-leak-kinds=definite \
            --errors-for-leak-kinds=definite --error-exitcode=99 --num-callers=30 \
            --suppressions=$(abspath tests/reliability/valgrind.supp)

.PHONY: test-valgrind
test-valgrind: $(BUILD)/attnd $(BUILD)/tests/test_server $(BUILD)/tests/test_reliability
	@command -v valgrind >/dev/null || { echo "test-valgrind: valgrind is missing"; exit 1; }
	@rm -rf $(VG_DIR) && mkdir -p $(VG_DIR)/logs $(VG_DIR)/server $(VG_DIR)/reliability
	@printf '#!/bin/sh\n# attnd under valgrind memcheck (generated by reliability.mk)\n%s\n%s\n' \
	  'ATTND_BLAS_CORETYPE=keep; export ATTND_BLAS_CORETYPE' \
	  'exec valgrind $(VG_FLAGS) --log-file=$(abspath $(VG_DIR))/logs/vg.%p.log $(abspath $(BUILD)/attnd) "$$@"' \
	  > $(VG_DIR)/attnd && chmod +x $(VG_DIR)/attnd
	$(PY) tests/server/make_models.py --out $(VG_DIR)/server
	TEST_TIME_SCALE=$(VG_SCALE) timeout -k 10 1800 $(BUILD)/tests/test_server \
	    --attnd $(VG_DIR)/attnd --data $(VG_DIR)/server --openapi api/openapi.yaml --only main
	TEST_TIME_SCALE=$(VG_SCALE) timeout -k 10 600 $(BUILD)/tests/test_server \
	    --attnd $(VG_DIR)/attnd --data $(VG_DIR)/server --only auth
	timeout -k 10 1200 $(BUILD)/tests/test_reliability --attnd $(VG_DIR)/attnd \
	    --work $(VG_DIR)/reliability --only limits,faults,framing,security --time-scale $(VG_SCALE)
	tests/reliability/valgrind_check.sh $(VG_DIR)/logs

# ---- Overload -----------------------------------------------------------------------------------
.PHONY: overload
overload: $(BUILD)/attnd
	@command -v wrk >/dev/null || { echo "overload: wrk is missing (Debian package wrk)"; exit 1; }
	timeout -k 10 300 $(PY) tests/reliability/overload.py --attnd $(BUILD)/attnd \
	    --work $(BUILD)/overload --report $(BUILD)/overload/report.md

include tests/fuzz/fuzz.mk
