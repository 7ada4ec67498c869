-- wrk script for the catalogue (docs/web-demo.md): GET /item/<id> with Zipf-popular ids, and a
-- machine-readable summary for the demo to read.
--
--   wrk -t2 -c16 -d10s --latency -s zipf.lua http://127.0.0.1:8000 -- N ALPHA SEED
--
-- Item i (1..N) is requested with probability proportional to 1 / i^ALPHA. Each thread draws
-- from its own generator (seeded SEED + thread number). wrk never retries a request: a failed one
-- is counted once, as a socket error (connect, read, write, timeout) or by its status here.
--
-- done() prints one line "EXO_WRK_JSON {...}": wrk's summary, the responses by status class, the
-- non-2xx count (wrk's own errors.status counts only status > 399), and the latency histogram as
-- [microseconds, count] pairs, so that several runs' histograms can be merged exactly.

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("thread_number", counter)
  table.insert(threads, thread)
end

local cdf, n_items

function init(args)
  n_items = tonumber(args[1]) or 10000
  local alpha = tonumber(args[2]) or 0.99
  local seed = tonumber(args[3]) or 1
  cdf = {}
  local sum = 0
  for i = 1, n_items do
    sum = sum + 1 / (i ^ alpha)
    cdf[i] = sum
  end
  for i = 1, n_items do cdf[i] = cdf[i] / sum end
  math.randomseed(seed * 7919 + thread_number)
  non2xx = 0
  by_class = {0, 0, 0, 0, 0}  -- 1xx .. 5xx
end

local function draw()
  local u = math.random()
  local lo, hi = 1, n_items
  while lo < hi do  -- the first i with cdf[i] >= u
    local mid = math.floor((lo + hi) / 2)
    if cdf[mid] < u then lo = mid + 1 else hi = mid end
  end
  return lo
end

function request()
  return wrk.format("GET", "/item/" .. draw())
end

function response(status, headers, body)
  if status < 200 or status > 299 then non2xx = non2xx + 1 end
  local class = math.floor(status / 100)
  if class >= 1 and class <= 5 then by_class[class] = by_class[class] + 1 end
end

function done(summary, latency, requests)
  local n2 = 0
  local classes = {0, 0, 0, 0, 0}
  for _, t in ipairs(threads) do
    n2 = n2 + (t:get("non2xx") or 0)
    local c = t:get("by_class") or {}
    for i = 1, 5 do classes[i] = classes[i] + (c[i] or 0) end
  end
  local hist = {}
  for i = 1, #latency do
    local value, count = latency(i)
    hist[#hist + 1] = string.format("[%d,%d]", value, count)
  end
  local e = summary.errors
  io.write(string.format(
    'EXO_WRK_JSON {"duration_us":%d,"requests":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"non2xx":%d,"status_classes":{"1xx":%d,"2xx":%d,"3xx":%d,"4xx":%d,"5xx":%d},' ..
    '"latency_us":{"min":%d,"max":%d,"mean":%.1f},"histogram_us":[%s]}\n',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout, n2,
    classes[1], classes[2], classes[3], classes[4], classes[5],
    latency.min, latency.max, latency.mean, table.concat(hist, ",")))
end
