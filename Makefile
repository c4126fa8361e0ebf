# attnd - build, test and benchmark. `make` builds; `make test` runs every test; `make bench`
# measures. The deps targets install missing Debian packages (as root) before anything else.

CC       ?= cc
BUILD    ?= build
WERROR   ?=
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
WARN     := -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wvla -Wdouble-promotion $(if $(WERROR),-Werror)
CPPFLAGS += -D_GNU_SOURCE
# Each layer sees its own headers and those below it, never those above: attention/ compiles with
# -Iattention alone; api/ is rooms (api/README.md), base < codec < models < session < job < v1 <
# v2, each compiling with -Iattention, its own folder and the folders of the rooms below it (a
# room reaches api.h as "../api.h"); the server, tests and benchmarks compile with all of them. A
# file that includes a header from above is a compile error (make check-layers). The flags of a
# source are those of its folder: INC_api_v1 for api/v1/*.c, INC_ALL where a folder has none.
API_ROOMS      := base codec models session job v1 v2
INC_attention  := -Iattention
INC_api_base   := $(INC_attention) -Iapi/base
INC_api_codec  := $(INC_api_base) -Iapi/codec
INC_api_models := $(INC_api_codec) -Iapi/models
INC_api_session := $(INC_api_models) -Iapi/session
INC_api_job    := $(INC_api_session) -Iapi/job
INC_api_v1     := $(INC_api_job) -Iapi/v1
INC_api_v2     := $(INC_api_v1) -Iapi/v2
INC_ALL        := -Iattention -Iapi $(API_ROOMS:%=-Iapi/%) -Iserver
layer_inc       = $(or $(INC_$(subst /,_,$(patsubst %/,%,$(dir $<)))),$(INC_ALL))
LDLIBS   := -lopenblas -lpthread -lm
PY       := /usr/bin/python3

# Debian packages each goal needs (README.md, "Dependencies", says what each is for, and
# tests/readme_deps.py checks that it names these and no others).
PKG_BUILD     := gcc make libc6-dev libopenblas-dev libmicrohttpd-dev zlib1g-dev
PKG_TEST      := $(PKG_BUILD) libjansson-dev python3 python3-torch python3-numpy python3-yaml \
                 python3-venv libcurl4-openssl-dev prometheus chromium fonts-wqy-microhei
PKG_CONTAINER := buildah podman runc debootstrap curl python3 python3-yaml

ATTN_SRC := attention/error.c attention/plan.c attention/sdpa.c attention/trace.c attention/mha.c \
            attention/batch.c attention/kernels.c attention/tiles.c attention/pool.c attention/blas.c \
            attention/decode.c attention/stack.c
ATTN_OBJ := $(ATTN_SRC:%.c=$(BUILD)/%.o)

.PHONY: all run test test-core check-layers check-readme-deps test-web screenshots test-deploy \
        container-test bench bench-w6 deps-build deps-test check-format format clean

HEADERS := $(wildcard attention/*.h api/*.h api/*/*.h server/*.h tests/*.h)

all: $(BUILD)/libattn.a $(BUILD)/attnd

# Installs what is missing from the given package list (needs root and apt).
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages:$$missing (run as root, or install them)"; exit 1; fi; \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	fi
endef

deps-build:
	$(call install_missing,$(PKG_BUILD))

# npm: Debian's nodejs and npm, unless a node with npm is already there (e.g. from nodesource).
deps-test:
	$(call install_missing,$(PKG_TEST))
	@command -v npm >/dev/null || { echo "installing: nodejs npm"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(layer_inc) $(WARN) $(CFLAGS) -c $< -o $@

# The softmax kernels: vectorised per ISA; FMA contraction is allowed there (never -ffast-math).
# So are the fused path's block products (tiles.c).
$(BUILD)/attention/kernels.o $(BUILD)/attention/tiles.o: $(BUILD)/attention/%.o: attention/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(layer_inc) $(WARN) $(CFLAGS) -O3 -ffp-contract=fast -c $< -o $@

$(BUILD)/libattn.a: $(ATTN_OBJ)
	$(AR) rcs $@ $^

# test_attention's sources: tests/attention/main.c and a file per behaviour it tests, sharing
# tests/attention/attention_test.h (not in $(HEADERS), so named here).
ATTN_TEST_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/attention/*.c))

$(ATTN_TEST_OBJ): tests/attention/attention_test.h

$(BUILD)/tests/test_attention: $(ATTN_TEST_OBJ) $(BUILD)/libattn.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/oracle_run: $(BUILD)/tests/oracle_run.o $(BUILD)/libattn.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# bench_attention --w6 runs W6 (bench/w6.c).
$(BUILD)/bench/bench_attention.o $(BUILD)/bench/w6.o: bench/w6.h

$(BUILD)/bench/bench_attention: $(BUILD)/bench/bench_attention.o $(BUILD)/bench/w6.o \
                               $(BUILD)/libattn.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# -ljansson: bench_api measures what reading its bodies with jansson would cost (attnd does not).
$(BUILD)/bench/bench_api: $(BUILD)/bench/bench_api.o $(BUILD)/tests/float_ref.o $(BUILD)/libapi.a \
                         $(BUILD)/libattn.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS) -ljansson

# The api/ and server/ modules bring their own build and test rules: libapi.a and test-api,
# build/attnd and test-server.
include api/api.mk server/server.mk
# The reliability suite (test-asan, test-valgrind, overload, fuzz), the HTTP benchmark, the
# ONNX Runtime peer of make bench (bench-ort, bench-ort-deps) and the classroom benchmark
# (bench-classroom). Optional
# so that the Dockerfile's builder, which copies only the sources of build/attnd, can use make.
-include tests/reliability/reliability.mk bench/http/http.mk bench/ort/ort.mk \
         bench/classroom/classroom.mk
# The Python and JavaScript clients' tests (test-clients).
-include clients/clients.mk
# api/openapi.yaml through client generators and linters (test-spec).
-include tests/openapi/spec.mk

run: deps-build
	$(MAKE) --no-print-directory $(BUILD)/attnd
	$(BUILD)/attnd

test: deps-test
	$(MAKE) --no-print-directory test-core test-api test-server test-clients test-spec test-web \
	  test-deploy check-readme-deps test-reliability

test-core: $(BUILD)/tests/test_attention $(BUILD)/tests/oracle_run check-layers
	$(BUILD)/tests/test_attention
	$(PY) tests/oracle/run_oracle.py --runner $(BUILD)/tests/oracle_run --work $(BUILD)/oracle

# The layer rule, tried: a header from above must not be found from attention/ or from a room of
# api/ (__has_include must say no), and one from the layer or room itself must compile. Each room of api/ is probed with its own flags against the header of every
# room above it and server.h; and no source of a room includes by a path (only "../api.h"), which
# would step around the flags.
check-layers:
	@probe() { printf '#include "%s"\n' "$$1" | $(CC) $(CPPFLAGS) $$2 -fsyntax-only -x c - 2>/dev/null; }; \
	found() { printf '#if !__has_include("%s")\n#error\n#endif\n' "$$1" \
	  | $(CC) $(CPPFLAGS) $$2 -fsyntax-only -x c - 2>/dev/null; }; \
	ok=1; bad() { echo "check-layers: $$*"; ok=0; }; \
	found api.h "$(INC_attention)" && bad "attention/ can include api.h"; \
	found server.h "$(INC_attention)" && bad "attention/ can include server.h"; \
	found base.h "$(INC_attention)" && bad "attention/ can include base.h"; \
	probe attention.h "$(INC_attention)" || bad "attention/ cannot include attention.h"; \
	probe server.h "$(INC_ALL)" || bad "the server cannot include server.h"; \
	above="$(API_ROOMS)"; \
	$(foreach r,$(API_ROOMS),above="$${above#*$(r)}"; \
	  probe $(r).h "$(INC_api_$(r))" || bad "api/$(r)/ cannot include $(r).h"; \
	  found server.h "$(INC_api_$(r))" && bad "api/$(r)/ can include server.h"; \
	  for a in $$above; do \
	    found $$a.h "$(INC_api_$(r))" && bad "api/$(r)/ can include $$a.h, a room above it"; \
	  done;) \
	bypass=$$(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*/' $(API_ROOMS:%=api/%/*.[ch]) \
	  | grep -v '"\.\./api\.h"'); \
	[ -z "$$bypass" ] || bad "api/ includes by a path: $$bypass"; \
	[ $$ok = 1 ] && echo "check-layers: attention/ sees attention/ only; api/'s rooms" \
	  "$(API_ROOMS) each see attention/, themselves and the rooms before them, never one after"

# The visualizer in Debian's chromium, driven by playwright-core (never a downloaded browser);
# screens.test.mjs: the exports, the call run as curl, Python and JavaScript, the page offline,
# and every screen size; path.test.mjs: the guided path and its experiments; learned.test.mjs: the
# step on a model that learned (the induction model's heads and predictions); layout.test.mjs: the
# projector and the phone measured, and the root font following the browser's default;
# class.test.mjs: every request of the path within 64 KiB up and 256 KiB down, and a busy
# server's 503 retried (a proxy in the test); cache.test.mjs: a second load sends no file again,
# the icon comes once; gen.test.mjs: generation on a decode session, token by token, the rows
# above unchanged, the labels, the chart, a lost answer, a 404 and the session deleted.
test-web: $(BUILD)/attnd tests/web/node_modules/playwright-core
	timeout 300 node tests/web/visualizer.test.mjs $(BUILD)/attnd $(BUILD)/web-test
	timeout 300 node tests/web/lesson.test.mjs $(BUILD)/attnd $(BUILD)/web-lesson
	timeout 600 node tests/web/english.test.mjs $(BUILD)/attnd $(BUILD)/web-english
	timeout 300 node tests/web/chapter.test.mjs $(BUILD)/attnd $(BUILD)/web-chapter
	timeout 600 node tests/web/contrast.test.mjs $(BUILD)/attnd $(BUILD)/web-contrast
	timeout 300 node tests/web/screens.test.mjs $(BUILD)/attnd $(BUILD)/web-test
	timeout 300 node tests/web/path.test.mjs $(BUILD)/attnd $(BUILD)/web-path
	timeout 300 node tests/web/gen.test.mjs $(BUILD)/attnd $(BUILD)/web-gen
	timeout 300 node tests/web/learned.test.mjs $(BUILD)/attnd $(BUILD)/web-learned
	timeout 300 node tests/web/layout.test.mjs $(BUILD)/attnd $(BUILD)/web-layout
	timeout 300 node tests/web/class.test.mjs $(BUILD)/attnd $(BUILD)/web-class
	timeout 120 node tests/web/cache.test.mjs $(BUILD)/attnd $(BUILD)/web-cache

# The README's pictures of the visualizer and their manifest (docs/), rendered from a live attnd;
# test-web fails when they are stale. Run after changing web/, and commit docs/.
screenshots: $(BUILD)/attnd tests/web/node_modules/playwright-core
	timeout 120 node tests/web/screenshots.mjs $(BUILD)/attnd docs

tests/web/node_modules/playwright-core:
	cd tests/web && npm ci --no-audit --no-fund --loglevel=error

# The README's list of dependencies against the package lists here, in .ci/run and in the npm
# manifests, and against what build/attnd links.
check-readme-deps: $(BUILD)/attnd
	@printf '%s\n' "PKG_BUILD $(PKG_BUILD)" "PKG_TEST $(PKG_TEST)" "PKG_CONTAINER $(PKG_CONTAINER)" \
	  "PKG_BENCH_HTTP $(PKG_BENCH_HTTP)" "PKG_BENCH_ORT $(PKG_BENCH_ORT)" \
	  "PKG_BENCH_CLASSROOM $(PKG_BENCH_CLASSROOM)" "PKG_TRAIN $(PKG_TRAIN)" > $(BUILD)/packages.txt
	$(PY) tests/readme_deps.py --readme README.md --packages $(BUILD)/packages.txt --ci .ci/run \
	  --attnd $(BUILD)/attnd

# deploy/ and the Dockerfile, checked statically and against the binary; every manifest against
# its published schema (tests/deploy/schemas.mjs); the Grafana dashboard's queries against the
# metrics attnd exports.
test-deploy: $(BUILD)/attnd
	$(PY) tests/deploy/check_deploy.py $(BUILD)/attnd
	@[ -d tests/deploy/node_modules/kubernetes-models ] || \
	  (cd tests/deploy && npm ci --no-audit --no-fund --loglevel=error)
	timeout 120 node tests/deploy/schemas.mjs
	timeout 60 $(PY) tests/deploy/check_dashboard.py --dashboard deploy/grafana/attnd.json \
	  --attnd $(BUILD)/attnd

# Builds the image with buildah and runs it with podman (there is no Docker engine here).
container-test:
	$(call install_missing,$(PKG_CONTAINER))
	bash tests/container/smoke.sh

# The core benchmark, then ONNX Runtime beside it (bench/ort/ort.mk) on W1 to W5 and on W6's
# decode session, appended to the same report.
bench: deps-test bench-ort-deps
	$(MAKE) --no-print-directory $(BUILD)/bench/bench_attention $(BUILD)/bench/bench_api
	$(PY) bench/run_bench.py --bin $(BUILD)/bench/bench_attention --api-bin $(BUILD)/bench/bench_api \
	  --out $(BUILD)/bench/results.md
	$(PY) bench/run_ort.py --bin $(BUILD)/bench/bench_attention --work $(BUILD)/bench/ort \
	  --out $(BUILD)/bench/ort_results.md --append $(BUILD)/bench/results.md $(ORT_ARGS)
	$(PY) bench/run_ort_w6.py --bin $(BUILD)/bench/bench_attention --work $(BUILD)/bench/ort_w6 \
	  --out $(BUILD)/bench/ort_w6.md --append $(BUILD)/bench/results.md $(W6_ORT_ARGS)

# W6 alone (bench_attention --w6): a decode session of 4,096 one-row appends against recomputing
# the prefix; its JSON lines in $(BUILD)/bench/w6.jsonl. W6_ARGS passes --w6-repeats and
# --w6-stride.
bench-w6: $(BUILD)/bench/bench_attention
	$(BUILD)/bench/bench_attention --w6 $(W6_ARGS) | tee $(BUILD)/bench/w6.jsonl

FORMATTED := $(wildcard attention/*.[ch] api/*.[ch] api/*/*.[ch] server/*.[ch] tests/*.[ch] \
               bench/*.[ch] tests/fuzz/*.[ch] tests/reliability/*.[ch] tests/server/*.[ch] \
               tests/api/*.[ch] tests/attention/*.[ch])

# The house keeps every source file under 750 lines (split along the seams the code has).
LINE_CHECKED := $(shell find attention api server web tests bench clients deploy -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.py' -o -name '*.js' -o -name '*.mjs' -o \
       -name '*.sh' -o -name '*.lua' -o -name '*.mk' -o -name '*.css' -o -name '*.html' \) \
    -not -path '*/node_modules/*' 2>/dev/null) Makefile

check-format:
	clang-format --dry-run -Werror $(FORMATTED)
	@long=$$(awk 'FNR == 751 { print FILENAME }' $(LINE_CHECKED)); \
	if [ -n "$$long" ]; then echo "over 750 lines:" $$long; exit 1; fi

format:
	clang-format -i $(FORMATTED)

clean:
	rm -rf $(BUILD)
