# fuzz.mk - the libFuzzer targets of tests/fuzz, included by tests/reliability/reliability.mk.
#
#   make fuzz          builds the targets (clang, -fsanitize=fuzzer,address,undefined, in
#                      $(FUZZ_BUILD)) and runs each for FUZZ_SECONDS (default 300)
#   make fuzz-ci       the same for FUZZ_CI_SECONDS each (default 60: five targets, about 5.5
#                      minutes of CI with the build); .ci/run runs it as its own step
#   make fuzz-replay   (part of `make test`) replays tests/fuzz/regressions/TARGET/* through each
#                      target built with the ordinary compiler and no libFuzzer
#   make fuzz-coverage the source lines of api/ and of server/'s HTTP files (http.c, conn.c, wire.c,
#                      reply.c, routes.c) that each target's corpus (after make fuzz) reaches,
#                      with clang's source-based coverage
#
# Targets: request (api_job_parse, run and respond, both endpoints; and decode sessions: an open
# and an append), v2 (api_v2_parse, run and
# respond: the Open Inference Protocol's JSON and raw tensor bytes), base64 (the codec),
# safetensors (api_model_from_safetensors), http (raw bytes into server/http.c on
# libmicrohttpd, in-process). Seeds are written by make_seeds.py from tests/api_cases; the
# corpora grow in $(FUZZ_BUILD)/corpus and stay between runs.

FUZZ_BUILD      ?= build-fuzz
FUZZ_CC         ?= clang
FUZZ_SECONDS    ?= 300
FUZZ_CI_SECONDS ?= 60
FUZZ_TARGETS    := request v2 base64 safetensors http
FUZZ_SAN        := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                   -fno-omit-frame-pointer
FUZZ_CFLAGS     := -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_BINS       := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz/fuzz_%)

# The product code, instrumented, built by this Makefile's own rules into $(FUZZ_BUILD); the
# HTTP target takes every server object but main.o.
FUZZ_LIBS    := $(FUZZ_BUILD)/libapi.a $(FUZZ_BUILD)/libattn.a
FUZZ_SRV_OBJ := $(patsubst $(BUILD)/%,$(FUZZ_BUILD)/%,$(filter-out $(BUILD)/server/main.o,$(SRV_OBJ)))

# Per target: the extra objects it links, its dictionary, its largest input, extra flags.
FUZZ_OBJ_http      := $(FUZZ_SRV_OBJ)
FUZZ_DICT_request  := tests/fuzz/json.dict
FUZZ_DICT_v2       := tests/fuzz/json.dict
FUZZ_DICT_base64   := tests/fuzz/json.dict
FUZZ_DICT_safetensors := tests/fuzz/json.dict
FUZZ_DICT_http     := $(FUZZ_BUILD)/http-all.dict
FUZZ_ARGS_request  := -max_len=65536
FUZZ_ARGS_v2       := -max_len=65536
FUZZ_ARGS_base64   := -max_len=4096
FUZZ_ARGS_safetensors := -max_len=16384
FUZZ_ARGS_http     := -max_len=65536 -close_fd_mask=2

.PHONY: fuzz fuzz-ci fuzz-build fuzz-seeds fuzz-replay fuzz-instrumented fuzz-coverage

fuzz-instrumented:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) CFLAGS='$(FUZZ_CFLAGS)' \
	    $(FUZZ_LIBS) $(FUZZ_SRV_OBJ)

$(FUZZ_BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h tests/fuzz/fuzz_api.h fuzz-instrumented
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(INC_ALL) $(WARN) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_OBJ_$*) \
	    $(FUZZ_LIBS) -o $@ -lmicrohttpd -lz $(LDLIBS)

$(FUZZ_BUILD)/http-all.dict: tests/fuzz/json.dict tests/fuzz/http.dict
	@mkdir -p $(dir $@)
	cat $^ > $@

fuzz-build: $(FUZZ_BINS) $(FUZZ_BUILD)/http-all.dict

fuzz-seeds:
	$(PY) tests/fuzz/make_seeds.py --cases tests/api_cases --out $(FUZZ_BUILD)/seeds
	@for t in $(FUZZ_TARGETS); do mkdir -p $(FUZZ_BUILD)/seeds/$$t; \
	  [ ! -d tests/fuzz/regressions/$$t ] || cp tests/fuzz/regressions/$$t/* $(FUZZ_BUILD)/seeds/$$t/; done

# Runs every target even when one fails, then fails if any did.
define fuzz_run_all
	@rc=0; for t in $(FUZZ_TARGETS); do \
	  case $$t in request) d='$(FUZZ_DICT_request)'; a='$(FUZZ_ARGS_request)';; \
	    v2) d='$(FUZZ_DICT_v2)'; a='$(FUZZ_ARGS_v2)';; \
	    base64) d='$(FUZZ_DICT_base64)'; a='$(FUZZ_ARGS_base64)';; \
	    safetensors) d='$(FUZZ_DICT_safetensors)'; a='$(FUZZ_ARGS_safetensors)';; \
	    http) d='$(FUZZ_DICT_http)'; a='$(FUZZ_ARGS_http)';; esac; \
	  tests/fuzz/run_fuzz.sh $$t $(FUZZ_BUILD)/fuzz/fuzz_$$t $(1) $(FUZZ_BUILD) \
	    $(FUZZ_BUILD)/seeds/$$t $$d $$a || rc=1; \
	done; exit $$rc
endef

fuzz: fuzz-build fuzz-seeds
	$(call fuzz_run_all,$(FUZZ_SECONDS))

fuzz-ci: fuzz-build fuzz-seeds
	$(call fuzz_run_all,$(FUZZ_CI_SECONDS))

# ---- Replay of the regression inputs (no libFuzzer; run by `make test`) --------------------

FUZZ_REPLAY_BINS := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%-replay)
FUZZ_ROBJ_http   := $(filter-out $(BUILD)/server/main.o,$(SRV_OBJ))

$(BUILD)/fuzz/fuzz_%-replay: tests/fuzz/fuzz_%.c tests/fuzz/replay_main.c tests/fuzz/fuzz.h tests/fuzz/fuzz_api.h \
                             $(BUILD)/libapi.a $(BUILD)/libattn.a $(FUZZ_ROBJ_http)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(INC_ALL) -Itests/fuzz $(WARN) $(CFLAGS) $< tests/fuzz/replay_main.c \
	    $(FUZZ_ROBJ_$*) $(BUILD)/libapi.a $(BUILD)/libattn.a -o $@ -lmicrohttpd -lz $(LDLIBS)

fuzz-replay: $(FUZZ_REPLAY_BINS)
	@for t in $(FUZZ_TARGETS); do \
	  if [ -d tests/fuzz/regressions/$$t ]; then \
	    $(BUILD)/fuzz/fuzz_$$t-replay tests/fuzz/regressions/$$t >/dev/null 2>$(BUILD)/fuzz/$$t.err \
	      || { echo "fuzz-replay: $$t failed:"; tail -30 $(BUILD)/fuzz/$$t.err; exit 1; }; \
	    echo "fuzz-replay $$t: $$(ls tests/fuzz/regressions/$$t | wc -l) inputs ok"; \
	  fi; done

# ---- Coverage of the corpora (clang source-based coverage of the replay builds) -------------

FUZZ_COV := $(FUZZ_BUILD)/coverage

fuzz-coverage:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_COV) CC=clang \
	    CFLAGS='-O1 -g -fprofile-instr-generate -fcoverage-mapping' \
	    $(FUZZ_TARGETS:%=$(FUZZ_COV)/fuzz/fuzz_%-replay) >/dev/null
	@for t in $(FUZZ_TARGETS); do \
	  LLVM_PROFILE_FILE=$(FUZZ_COV)/$$t.profraw $(FUZZ_COV)/fuzz/fuzz_$$t-replay \
	    $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/seeds/$$t >/dev/null 2>&1 || exit 1; \
	  llvm-profdata merge -o $(FUZZ_COV)/$$t.profdata $(FUZZ_COV)/$$t.profraw || exit 1; \
	  echo "== $$t: lines and branches its corpus reaches"; \
	  llvm-cov report $(FUZZ_COV)/fuzz/fuzz_$$t-replay -instr-profile=$(FUZZ_COV)/$$t.profdata \
	    api/*/*.c server/http.c server/conn.c server/reply.c server/routes.c server/wire.c \
	    | awk '/\.c / && $$8 != $$9 { \
	      printf "  %-22s lines %6s  branches %6s\n", $$1, $$10, $$13 }'; done
