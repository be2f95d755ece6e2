-- One agent's breaker in Redis: every read-modify-write of it, as one script, so replicas
-- never interleave. The rules are the `agent` policy's (engine/breaker.py) in wall-clock
-- seconds, with `now` always the calling engine's clock (ARGV[2]), never Redis's.
--
-- KEYS[1]  the breaker's hash
-- ARGV     op, now, origin, seen_gen, seen_ver, ttl_ms, channel, name,
--          window, cooldown, auth_threshold, upstream_threshold, then the op's own:
--   admit     token, lease
--   record    token, class, counted ("1"/"0"), detail
--   tick      (none)
--   reset     actor, reason
--   reconcile state, count, last_failure, detail, opened, cooldown, failed_probes, paged, cause,
--             the probe still out (its call token, or "") and its lease's end
--   read      (none)
-- Returns JSON: {ver, gen, s = the fields, tr = transitions made, probe, admit, left, expired}
-- or {missing = true} (the key is gone though this replica saw it: wiped or collected), or
-- {behind = true} (the key's generation is older than the one this replica saw), or
-- {foreign = "<format>"} (written by another format: never touched).

local FORMAT = "1"
local key = KEYS[1]
local op, now, origin = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local seen_gen, seen_ver = tonumber(ARGV[4]), tonumber(ARGV[5])
local ttl_ms, channel, name = ARGV[6], ARGV[7], ARGV[8]
local window, cooldown_step = tonumber(ARGV[9]), tonumber(ARGV[10])
local auth_threshold, upstream_threshold = tonumber(ARGV[11]), tonumber(ARGV[12])

local raw = redis.call("HGETALL", key)
local s = {}
for i = 1, #raw, 2 do
  s[raw[i]] = raw[i + 1]
end
local exists = #raw > 0
if exists and s.v ~= FORMAT then
  return cjson.encode({foreign = s.v or "none"})
end
if not exists and seen_ver > 0 and op ~= "reconcile" then
  return cjson.encode({missing = true})
end
if exists and seen_gen > (tonumber(s.gen) or 0) and op ~= "reconcile" then
  -- The store is behind what this replica saw (a failover's new primary missed a write):
  -- the replica writes its verdict back before anything is decided on the older one.
  return cjson.encode({behind = true})
end

-- A stored number, or nil for none and for what no number should be (NaN, infinities,
-- text): the replica reads the rest within bounds.
local function num(text)
  local value = tonumber(text)
  if value == nil or value ~= value or value == math.huge or value == -math.huge then
    return nil
  end
  return value
end

local b = {
  state = s.state or "closed",
  count = num(s.count) or 0,
  last_failure = num(s.lf),
  detail = s.detail or "",
  opened = num(s.opened),
  cooldown = num(s.cooldown) or 0,
  failed_probes = num(s.fp) or 0,
  paged = s.paged == "1",
  cause = s.cause or "",
  probe = s.probe or "",
  probe_deadline = num(s.pd) or 0,
}
-- Stored times are read within bounds, as the replicas read them: a replica whose clock ran
-- ahead must not hold the fleet open (or its probe out) for longer than the policy says. A
-- bounded value is written back, so the bound holds from the first script that saw it.
local clamped = false
local function not_after(value, limit)
  if value ~= nil and value > limit then
    clamped = true
    return limit
  end
  return value
end
b.last_failure = not_after(b.last_failure, now)
b.opened = not_after(b.opened, now)
b.cooldown = math.max(0, not_after(b.cooldown, cooldown_step))
b.probe_deadline = not_after(b.probe_deadline, now + cooldown_step)
local ver, gen = num(s.ver) or 0, num(s.gen) or 0
-- Who wrote the verdict last: a read or a reconcile the store won writes nothing.
local answer = {writer = s.origin or ""}
local transitions = {}
local changed, bumped = clamped and exists, false

local function made(kind, fields)
  transitions[#transitions + 1] = {kind, fields}
  changed, bumped = true, true
end

local function close()
  b.state, b.count, b.failed_probes, b.paged = "closed", 0, 0, false
  b.probe, b.opened, b.cooldown, b.cause = "", nil, 0, ""
end

local function count_failure(class, detail)
  if b.last_failure ~= nil and now - b.last_failure > window then
    b.count = 0
  end
  b.count = b.count + 1
  b.last_failure, b.detail = now, detail
  changed = true
end

local function reopen()
  b.failed_probes = b.failed_probes + 1
  b.state, b.opened, b.probe, b.cooldown = "open", b.last_failure, "", cooldown_step
  made("circuit_breaker.reopened", {cooldown_seconds = b.cooldown})
  if b.failed_probes >= 2 and not b.paged then
    b.paged = true
    made("circuit_breaker.page", {})
  end
end

local function threshold(class)
  if class == "auth_failure" then
    return auth_threshold
  end
  return upstream_threshold
end

local function expire()
  if b.state == "half_open" and b.probe ~= "" and now > b.probe_deadline then
    local before = #transitions
    answer.expired = b.probe
    count_failure("upstream_failure", "probe never reported back")
    reopen()
    answer.expired_tr = #transitions - before
  end
end

local function half_open_if_due()
  if b.state == "open" and b.opened ~= nil and now >= b.opened + b.cooldown then
    b.state, b.probe = "half_open", ""
    made("circuit_breaker.half_open", {})
  end
end

if op == "admit" then
  local token, lease = ARGV[13], tonumber(ARGV[14])
  expire()
  if b.state == "closed" then
    answer.admit = "normal"
  elseif b.state == "open" and now < b.opened + b.cooldown then
    answer.admit, answer.left = "open", b.opened + b.cooldown - now
  else
    half_open_if_due()
    if b.probe == "" then
      b.probe, b.probe_deadline = token, now + lease
      changed, bumped = true, true
      answer.admit = "probe"
    else
      answer.admit = "probe_in_flight"
    end
  end
elseif op == "record" then
  local token, class, counted, detail = ARGV[13], ARGV[14], ARGV[15] == "1", ARGV[16]
  expire()
  local was_probe = b.state == "half_open" and b.probe == token
  answer.probe = was_probe
  if class == "success" then
    if b.state == "closed" then
      if b.count ~= 0 then
        b.count = 0
        changed = true
      end
    else
      close()
      made("circuit_breaker.recovered", {})
    end
  elseif not counted then
    if was_probe then
      b.probe = ""
      changed = true
    end
  else
    count_failure(class, detail)
    if was_probe then
      reopen()
    elseif b.state == "closed" and b.count >= threshold(class) then
      b.state, b.opened, b.failed_probes, b.paged = "open", now, 0, false
      b.cause, b.cooldown = class, cooldown_step
      made("circuit_breaker.tripped",
        {failure_class = class, count = b.count, cooldown_seconds = b.cooldown})
    end
  end
elseif op == "tick" then
  expire()
  half_open_if_due()
elseif op == "reset" then
  close()
  b.last_failure = nil
  made("circuit_breaker_reset", {actor = ARGV[13], reason = ARGV[14]})
elseif op == "reconcile" then
  local mine = {
    state = ARGV[13], count = tonumber(ARGV[14]), last_failure = num(ARGV[15]),
    detail = ARGV[16], opened = num(ARGV[17]), cooldown = tonumber(ARGV[18]),
    failed_probes = tonumber(ARGV[19]), paged = ARGV[20] == "1", cause = ARGV[21],
    probe = ARGV[22] or "", probe_deadline = not_after(num(ARGV[23]) or 0, now + cooldown_step),
  }
  local function ends(v)
    return (v.opened or now) + v.cooldown
  end
  local graver
  if not exists or gen < seen_gen then
    -- A wiped (or collected) key, or one a failover's new primary has from before this
    -- replica's last transition: versions go on from this replica's, never back.
    ver, gen = math.max(ver, seen_ver), math.max(gen, seen_gen)
    graver = true
  elseif gen ~= seen_gen then
    -- A script made a transition meanwhile (a reset, a trip, a recovery): it stands.
    graver = false
  elseif b.state == "closed" then
    -- Both verdicts are of the outage (the store's may be another returning replica's):
    -- open beats closed, and of two closed the higher count stands.
    graver = mine.state ~= "closed" or mine.count > b.count
  else
    -- Deadlines only move later: of two open verdicts, the later end stands; at the same
    -- end, a probe still out stands over none (the fleet then waits for it).
    local later = ends(mine) > ends(b)
    local probing = ends(mine) == ends(b) and mine.probe ~= "" and b.probe == ""
    graver = mine.state ~= "closed" and (later or probing)
  end
  if graver then
    -- A write-back is no transition: the generation stays, so the next returning
    -- replica's verdict is weighed the same way.
    b = mine
    changed = true
    answer.won = "replica"
  else
    answer.won = "store"
  end
end

if changed then
  ver = ver + 1
  if bumped then
    gen = gen + 1
  end
  redis.call("HSET", key,
    "v", FORMAT, "ver", ver, "gen", gen, "state", b.state, "count", b.count,
    "lf", b.last_failure or "", "detail", b.detail, "opened", b.opened or "",
    "cooldown", b.cooldown, "fp", b.failed_probes, "paged", b.paged and "1" or "0",
    "cause", b.cause, "probe", b.probe, "pd", b.probe_deadline, "origin", origin, "at", now)
  redis.call("PEXPIRE", key, ttl_ms)
end

answer.name, answer.ver, answer.gen, answer.origin = name, ver, gen, origin
answer.s = {
  state = b.state, count = b.count, lf = b.last_failure or cjson.null, detail = b.detail,
  opened = b.opened or cjson.null, cooldown = b.cooldown, fp = b.failed_probes, paged = b.paged,
  cause = b.cause, probe = b.probe, pd = b.probe_deadline,
}
answer.tr = transitions
local encoded = cjson.encode(answer)
if changed then
  -- A channel with a hash tag is a cluster's shard channel, in this key's slot.
  redis.call(string.find(channel, "{", 1, true) and "SPUBLISH" or "PUBLISH", channel, encoded)
end
return encoded
