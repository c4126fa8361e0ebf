# spec.mk - make test-spec: api/openapi.yaml as client generators and linters read it, included by
# the top-level Makefile.
#
# Redocly (tests/openapi/redocly.yaml) and Spectral (spectral:oas, tests/openapi/spectral.yaml,
# where a warning fails too) must report nothing; then generators.mjs generates two TypeScript
# clients, openapi-typescript's types with openapi-fetch and orval's fetch client, compiles each
# with tsc --strict, and runs the README's calls through each against attnd on a loopback port.
# The generated code goes to build/openapi-clients. The npm packages are pinned in
# tests/openapi/package.json; none has an install script, and npm ci runs with --ignore-scripts
# so that none could fetch anything.

SPEC_DIR   := tests/openapi
SPEC_TOOLS := $(SPEC_DIR)/node_modules/.bin

$(SPEC_TOOLS)/orval: $(SPEC_DIR)/package.json $(SPEC_DIR)/package-lock.json
	@command -v npm >/dev/null || { echo "test-spec: npm is missing (Debian package npm)"; exit 1; }
	cd $(SPEC_DIR) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: test-spec
test-spec: $(BUILD)/attnd $(SPEC_TOOLS)/orval
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
	  timeout -k 10 60 $(SPEC_TOOLS)/redocly lint --config $(SPEC_DIR)/redocly.yaml api/openapi.yaml
	timeout -k 10 60 $(SPEC_TOOLS)/spectral lint --ruleset $(SPEC_DIR)/spectral.yaml \
	    --fail-severity warn api/openapi.yaml
	timeout -k 10 300 node $(SPEC_DIR)/generators.mjs $(BUILD)/attnd $(BUILD)/openapi-clients
