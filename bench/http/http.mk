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
