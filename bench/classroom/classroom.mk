# classroom.mk - the guided path for a whole class on one attnd (make bench-classroom), included
# by the top-level Makefile.
#
# make bench-classroom: one headless chromium (Debian's, through tests/web's playwright-core)
# walks the guided path and records every request the page makes (bench/classroom/record.mjs);
# then 30 and 60 simulated students replay them against one attnd started as the container starts
# it, in cgroups of 2 CPUs and 2 GiB that the benchmark makes, all on the same step at once and
# spread over the path (run_classroom.py). The report goes to build/bench/classroom.md, the
# recording to build/bench/classroom/recording.json. Needs root (cgroup v1). A few minutes.
# CLASSROOM_ARGS passes options: e.g. "--students 60 --modes together", or "--recording FILE".

PKG_BENCH_CLASSROOM := python3 chromium
CLASSROOM_ARGS ?=

.PHONY: bench-classroom bench-classroom-deps
bench-classroom-deps:
	$(call install_missing,$(PKG_BENCH_CLASSROOM))
	@command -v npm >/dev/null || { echo "installing: nodejs npm"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }

bench-classroom: bench-classroom-deps
	$(MAKE) --no-print-directory $(BUILD)/attnd tests/web/node_modules/playwright-core
	timeout 900 $(PY) bench/classroom/run_classroom.py --attnd $(BUILD)/attnd \
	  --out $(BUILD)/bench/classroom.md --work $(BUILD)/bench/classroom $(CLASSROOM_ARGS)
