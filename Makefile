# attnd - build, test and benchmark. `make` builds; `make test` runs every test; `make bench`
# measures. The deps targets install missing Debian packages (as root) before anything else.

CC       ?= cc
BUILD    ?= build
WERROR   ?=
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
WARN     := -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wvla -Wdouble-promotion $(if $(WERROR),-Werror)
CPPFLAGS += -D_GNU_SOURCE -Iattention
LDLIBS   := -lopenblas -lpthread -lm
PY       := /usr/bin/python3

# Debian packages each goal needs.
PKG_BUILD := gcc make libc6-dev libopenblas-dev
PKG_TEST  := $(PKG_BUILD) python3 python3-torch python3-numpy

ATTN_SRC := attention/mha.c attention/kernels.c attention/pool.c attention/blas.c
ATTN_OBJ := $(ATTN_SRC:%.c=$(BUILD)/%.o)

.PHONY: all test bench deps-build deps-test check-format format clean

all: $(BUILD)/libattn.a

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

deps-test:
	$(call install_missing,$(PKG_TEST))

$(BUILD)/%.o: %.c attention/attention.h attention/internal.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -c $< -o $@

# The softmax kernels: vectorised per ISA; FMA contraction is allowed there (never -ffast-math).
$(BUILD)/attention/kernels.o: attention/kernels.c attention/attention.h attention/internal.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -O3 -ffp-contract=fast -c $< -o $@

$(BUILD)/libattn.a: $(ATTN_OBJ)
	$(AR) rcs $@ $^

$(BUILD)/tests/test_attention: $(BUILD)/tests/test_attention.o $(BUILD)/libattn.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/oracle_run: $(BUILD)/tests/oracle_run.o $(BUILD)/libattn.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/bench/bench_attention: $(BUILD)/bench/bench_attention.o $(BUILD)/libattn.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

test: deps-test
	$(MAKE) --no-print-directory $(BUILD)/tests/test_attention $(BUILD)/tests/oracle_run
	$(BUILD)/tests/test_attention
	$(PY) tests/oracle/run_oracle.py --runner $(BUILD)/tests/oracle_run --work $(BUILD)/oracle

bench: deps-test
	$(MAKE) --no-print-directory OPT=-O2 $(BUILD)/bench/bench_attention
	$(PY) bench/run_bench.py --bin $(BUILD)/bench/bench_attention --out $(BUILD)/bench/results.md

check-format:
	clang-format --dry-run -Werror attention/*.c attention/*.h tests/*.c bench/*.c

format:
	clang-format -i attention/*.c attention/*.h tests/*.c bench/*.c

clean:
	rm -rf $(BUILD)
