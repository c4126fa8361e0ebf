# ort.mk - the ONNX Runtime peer of the core benchmark (issue 27), included by the top-level
# Makefile; make bench runs it after the core benchmark and appends its report to
# build/bench/results.md.
#
# make bench-ort: attnd's core beside ONNX Runtime (npm onnxruntime-node, its CPU library) in
# interleaved rounds of fresh processes; the report goes to build/bench/ort_results.md. Each round
# runs 6 to 12 bench_attention and 20 ORT processes (5 rounds of 1 s by default). ORT_ARGS passes options to bench/run_ort.py (--rounds N, --time S, --only W1,W3,
# --env-coretype Haswell, --ort-default-malloc).
#
# make bench-w6-ort: W6 (issue 37), attnd's decode session beside ONNX Runtime's decoding ops
# (com.microsoft.MultiHeadAttention with past and present, GroupQueryAttention on a shared
# buffer) on the same 4,096 one-row appends, in interleaved rounds of fresh processes
# (bench/run_ort_w6.py); the report goes to build/bench/ort_w6.md. About a minute a round on a
# quiet 2-core machine, 5 rounds by default. W6_ORT_ARGS passes options (--rounds N,
# --graphs mha,gqa, --no-profile, --env-coretype CORE).
#
# bench-ort-deps installs python3-onnx (the fused graphs are built with it) and onnxruntime-node
# as pinned in bench/ort/package-lock.json, with --ignore-scripts: the package's install script
# fetches GPU libraries, and the CPU library ships in the package.

PKG_BENCH_ORT := python3-onnx python3-torch python3-numpy
ORT_ARGS      ?=
W6_ORT_ARGS   ?=

.PHONY: bench-ort bench-ort-deps bench-w6-ort
bench-ort-deps: deps-test
	$(call install_missing,$(PKG_BENCH_ORT))
	$(MAKE) --no-print-directory bench/ort/node_modules/onnxruntime-node

bench/ort/node_modules/onnxruntime-node: bench/ort/package.json bench/ort/package-lock.json
	cd bench/ort && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

bench-ort: bench-ort-deps
	$(MAKE) --no-print-directory $(BUILD)/bench/bench_attention
	$(PY) bench/run_ort.py --bin $(BUILD)/bench/bench_attention --work $(BUILD)/bench/ort \
	  --out $(BUILD)/bench/ort_results.md $(ORT_ARGS)

bench-w6-ort: bench-ort-deps
	$(MAKE) --no-print-directory $(BUILD)/bench/bench_attention
	$(PY) bench/run_ort_w6.py --bin $(BUILD)/bench/bench_attention --work $(BUILD)/bench/ort_w6 \
	  --out $(BUILD)/bench/ort_w6.md $(W6_ORT_ARGS)
