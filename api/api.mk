# api.mk - build and test rules of api/, included by the top-level Makefile.
#
# test-api (run by `make test`) builds and runs tests/test_api, then lints api/openapi.yaml with
# @redocly/cli from tests/openapi (installed there by `npm ci` when missing; node_modules is not
# committed).

API_SRC := $(wildcard api/*.c)
API_OBJ := $(API_SRC:%.c=$(BUILD)/%.o)
OPENAPI_DIR := tests/openapi

$(BUILD)/libapi.a: $(API_OBJ)
	$(AR) rcs $@ $^

$(BUILD)/tests/test_api: $(BUILD)/tests/test_api.o $(BUILD)/libapi.a $(BUILD)/libattn.a
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ -ljansson $(LDLIBS)

.PHONY: test-api test-api-unit lint-openapi
test-api: test-api-unit lint-openapi

test-api-unit: $(BUILD)/tests/test_api
	$(BUILD)/tests/test_api tests/api_cases

lint-openapi:
	@command -v npm >/dev/null || { echo "lint-openapi: npm is missing (Debian package npm)"; exit 1; }
	@[ -x $(OPENAPI_DIR)/node_modules/.bin/redocly ] || \
	  (cd $(OPENAPI_DIR) && npm ci --no-audit --no-fund --loglevel=error)
	$(OPENAPI_DIR)/node_modules/.bin/redocly lint --config $(OPENAPI_DIR)/redocly.yaml \
	  api/openapi.yaml
