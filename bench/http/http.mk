# http.mk - the HTTP benchmark against a PyTorch peer service (make bench-http), included by the
# top-level Makefile.
#
# make bench-http: attnd against bench/peer (FastAPI + uvicorn + PyTorch, Debian packages) over
# loopback with wrk and single-client runs; the report goes to build/bench/http_results.md (the
# numbers in bench/RESULTS.md come from it). About 8 minutes.

PKG_BENCH_HTTP := wrk curl python3-fastapi python3-uvicorn python3-torch python3-numpy

.PHONY: bench-http
bench-http:
	$(call install_missing,$(PKG_BENCH_HTTP))
	$(MAKE) --no-print-directory $(BUILD)/attnd
	$(PY) bench/http/run_http_bench.py --attnd $(BUILD)/attnd --out $(BUILD)/bench/http_results.md

# make bench-w6-http: W6 over HTTP (issue 37, section 6), bench/http/w6_http.py: the 4,096
# one-row appends recomputed through POST /v1/attention (causal, inline params) at t = 1 and
# every 64th length, against a decode session once the server's /openapi.yaml has /v1/sessions
# (until then that side is reported as not measured). The report goes to
# build/bench/w6_http.md. W6_HTTP_ARGS passes options (--rounds N, --stride S, --url URL).
W6_HTTP_ARGS ?=

.PHONY: bench-w6-http
bench-w6-http:
	$(call install_missing,python3-torch python3-numpy)
	$(MAKE) --no-print-directory $(BUILD)/attnd
	$(PY) bench/http/w6_http.py --attnd $(BUILD)/attnd --work $(BUILD)/bench/w6_http \
	  --out $(BUILD)/bench/w6_http.md $(W6_HTTP_ARGS)
