# api.mk - build and test rules of api/, included by the top-level Makefile.
#
# test-api (run by `make test`) builds and runs tests/test_api, then lints api/openapi.yaml with
# @redocly/cli from tests/openapi (installed there by `npm ci` when missing; node_modules is not
# committed).
#
# check-floats-exhaustive (not in `make test`: minutes, one thread per core) writes every finite
# float32 with api_float_write and checks that it reads back, and that it matches the previous
# writer (tests/float_ref.c) byte for byte.

API_SRC := $(wildcard api/*.c)
API_OBJ := $(API_SRC:%.c=$(BUILD)/%.o)
OPENAPI_DIR := tests/openapi

$(BUILD)/libapi.a: $(API_OBJ)
	$(AR) rcs $@ $^

$(BUILD)/tests/test_api: $(BUILD)/tests/test_api.o $(BUILD)/tests/float_ref.o $(BUILD)/libapi.a \
                        $(BUILD)/libattn.a
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ -ljansson $(LDLIBS)

$(BUILD)/tests/floats_exhaustive: $(BUILD)/tests/floats_exhaustive.o $(BUILD)/tests/float_ref.o \
                                  $(BUILD)/libapi.a $(BUILD)/libattn.a
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

.PHONY: test-api test-api-unit lint-openapi check-floats-exhaustive
test-api: test-api-unit lint-openapi

test-api-unit: $(BUILD)/tests/test_api
	$(BUILD)/tests/test_api tests/api_cases

check-floats-exhaustive: $(BUILD)/tests/floats_exhaustive
	$(BUILD)/tests/floats_exhaustive

lint-openapi:
	@command -v npm >/dev/null || { echo "lint-openapi: npm is missing (Debian package npm)"; exit 1; }
	@[ -x $(OPENAPI_DIR)/node_modules/.bin/redocly ] || \
	  (cd $(OPENAPI_DIR) && npm ci --no-audit --no-fund --loglevel=error)
	$(OPENAPI_DIR)/node_modules/.bin/redocly lint --config $(OPENAPI_DIR)/redocly.yaml \
	  api/openapi.yaml
