# clients.mk - the clients of attnd, tested against a live attnd (included by the top-level
# Makefile). python_client.py installs clients/python with pip into a venv that sees Debian's
# numpy, offline (--no-index), and runs its checks there; js_client.test.mjs runs
# clients/js/attnd.mjs in node. Both start build/attnd on 127.0.0.1:0 and compare the clients'
# answers with the raw JSON API's bit for bit; each is bounded in time.

.PHONY: test-clients
test-clients: $(BUILD)/attnd
	timeout -k 10 300 $(PY) tests/clients/python_client.py --attnd $(BUILD)/attnd
	timeout -k 10 120 node tests/clients/js_client.test.mjs $(BUILD)/attnd
