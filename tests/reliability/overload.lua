-- overload.lua - wrk script of tests/reliability/overload.py. POSTs the body in the file
-- $OVERLOAD_BODY to /v1/attention; counts the answers by status; counts 503s without a
-- Retry-After header; and compares the "output" of every $OVERLOAD_EVERY-th 200 with the
-- numbers in the file $OVERLOAD_EXPECT (to 1e-4). done() prints one JSON line, "overload: {...}".
local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = slurp(os.getenv("OVERLOAD_BODY"))

local expected = {}
for num in slurp(os.getenv("OVERLOAD_EXPECT")):gmatch("[-+%d%.eE]+") do
  expected[#expected + 1] = tonumber(num)
end
local every = tonumber(os.getenv("OVERLOAD_EVERY") or "10")

local threads = {}
function setup(thread)
  threads[#threads + 1] = thread
end

function init(args)
  ok, busy, other, no_retry, checked, wrong = 0, 0, 0, 0, 0, 0
end

local function output_matches(body)
  local out = body:match('"output"%s*:%s*(%b[])')
  if not out then
    return false
  end
  local i = 0
  for num in out:gmatch("[-+%d%.eE]+") do
    i = i + 1
    local want = expected[i]
    if want == nil or math.abs(tonumber(num) - want) > 1e-4 then
      return false
    end
  end
  return i == #expected
end

function response(status, headers, body)
  if status == 200 then
    ok = ok + 1
    if ok % every == 0 then
      checked = checked + 1
      if not output_matches(body) then
        wrong = wrong + 1
      end
    end
  elseif status == 503 then
    busy = busy + 1
    if not (headers["Retry-After"] or headers["retry-after"]) then
      no_retry = no_retry + 1
    end
  else
    other = other + 1
  end
end

function done(summary, latency, requests)
  local t = {ok = 0, busy = 0, other = 0, no_retry = 0, checked = 0, wrong = 0}
  for _, thread in ipairs(threads) do
    for k, _ in pairs(t) do
      t[k] = t[k] + (thread:get(k) or 0)
    end
  end
  io.write(string.format(
    'overload: {"ok": %d, "busy": %d, "other": %d, "no_retry": %d, "checked": %d, ' ..
    '"wrong": %d, "requests": %d, "seconds": %.3f, "errors": %d, "timeouts": %d, ' ..
    '"p50_ms": %.3f, "p90_ms": %.3f, "p99_ms": %.3f, "max_ms": %.3f}\n',
    t.ok, t.busy, t.other, t.no_retry, t.checked, t.wrong, summary.requests,
    summary.duration / 1e6, summary.errors.connect + summary.errors.read + summary.errors.write,
    summary.errors.timeout, latency:percentile(50) / 1e3,
    latency:percentile(90) / 1e3, latency:percentile(99) / 1e3, latency.max / 1e3))
end
