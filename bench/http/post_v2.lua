-- post_v2.lua - wrk script: POST the body in the file named by $BODY to the URL as an Open
-- Inference Protocol request: its first $HEADER_LENGTH bytes are JSON, raw tensor bytes follow
-- (no Content-Type, as Triton's client sends it). Without $HEADER_LENGTH the body is all JSON.
local f = assert(io.open(os.getenv("BODY"), "rb"))
wrk.method = "POST"
local hl = os.getenv("HEADER_LENGTH")
if hl and hl ~= "" then
  wrk.headers["Inference-Header-Content-Length"] = hl
else
  wrk.headers["Content-Type"] = "application/json"
end
wrk.body = f:read("*a")
f:close()
