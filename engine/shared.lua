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
--   hold      actor, reason, until (wall)
--   release   actor, reason, close ("1"/"0"); a breaker not held is left as it is
--   mode      mode, the configuration's mode it was chosen over, actor, reason, from
--   reconcile state, count, last_failure, detail, opened, cooldown, failed_probes, paged, cause,
--             the probe still out (its call token, or "") and its lease's end, the hold (actor,
--             reason, until), the mode (mode, chosen over), the hold and mode generations seen
--   read      (none)
-- Returns JSON: {ver, gen, hgen, mgen, s = the fields, tr = transitions made, probe, admit,
-- left, expired}
-- or {missing = true} (the key is gone though this replica saw it: wiped or collected), or
-- {behind = true} (the key's generation is older than the one this replica saw), or
-- {foreign = "<format>"} (written by another format: never touched).
--
-- Operator writes (a hold, a release, a reset, a hold's expiry) move the hold generation
-- (`hgen`), a mode write the mode generation (`mgen`): on a replica's return they say whether
-- an operator wrote through the store while the replica was away (`reconcile`). A verdict of
-- an older build, without these fields, reads as never held, no mode chosen, generations 0.

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
  hold_by = s.hby or "",
  hold_reason = s.hwhy or "",
  hold_until = num(s.hu),
  mode = s.mode or "",
  mode_for = s.mfor or "",
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
local hgen, mgen = num(s.hgen) or 0, num(s.mgen) or 0
-- Who wrote the verdict last: a read or a reconcile the store won writes nothing.
local answer = {writer = s.origin or ""}
local transitions = {}
local changed, bumped = clamped and exists, false

local function made(kind, fields)
  transitions[#transitions + 1] = {kind, fields}
  changed, bumped = true, true
end

local function unhold()
  b.hold_by, b.hold_reason, b.hold_until = "", "", nil
end

local function close()
  b.state, b.count, b.failed_probes, b.paged = "closed", 0, 0, false
  b.probe, b.opened, b.cooldown, b.cause = "", nil, 0, ""
  unhold()
end

-- An operator's reset: closed, whatever the state was; a hold it ends is released first, by
-- the same actor.
local function reset(actor, reason)
  if b.state == "held" then
    made("circuit_breaker.released", {actor = actor})
  end
  close()
  b.last_failure = nil
  made("circuit_breaker_reset", {actor = actor, reason = reason})
  hgen = hgen + 1
end

-- A hold ended (by an operator, or `expiry`): half-open, the ladder's first step next. The
-- hold's words stay until the probe's outcome, so a refusal behind that probe names it.
local function release(actor)
  b.state, b.probe, b.failed_probes, b.paged = "half_open", "", 0, false
  made("circuit_breaker.released", {actor = actor})
  made("circuit_breaker.half_open", {})
  hgen = hgen + 1
end

local function release_if_due()
  if b.state == "held" and now >= (b.hold_until or now) then
    release("expiry")
  end
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
  unhold()
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
  release_if_due()
  if b.state == "closed" then
    answer.admit = "normal"
  elseif b.state == "held" then
    answer.admit, answer.left = "held", b.hold_until - now
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
elseif op == "record" and b.state == "held" then
  -- A call admitted before the hold (on any replica): recorded there, and it changes nothing.
  answer.probe = false
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
  release_if_due()
  half_open_if_due()
elseif op == "reset" then
  reset(ARGV[13], ARGV[14])
elseif op == "hold" then
  b.state, b.probe = "held", ""
  b.hold_by, b.hold_reason, b.hold_until = ARGV[13], ARGV[14], num(ARGV[15])
  made("circuit_breaker.held", {actor = b.hold_by, reason = b.hold_reason, ["until"] = b.hold_until})
  hgen = hgen + 1
elseif op == "release" then
  if b.state == "held" and ARGV[15] == "1" then
    reset(ARGV[13], ARGV[14])
  elseif b.state == "held" then
    release(ARGV[13])
  end
elseif op == "mode" then
  b.mode, b.mode_for = ARGV[13], ARGV[14]
  made("circuit_breaker.mode", {actor = ARGV[15], reason = ARGV[16], from = ARGV[17], to = b.mode})
  mgen = mgen + 1
elseif op == "reconcile" then
  local mine = {
    state = ARGV[13], count = tonumber(ARGV[14]), last_failure = num(ARGV[15]),
    detail = ARGV[16], opened = num(ARGV[17]), cooldown = tonumber(ARGV[18]),
    failed_probes = tonumber(ARGV[19]), paged = ARGV[20] == "1", cause = ARGV[21],
    probe = ARGV[22] or "", probe_deadline = not_after(num(ARGV[23]) or 0, now + cooldown_step),
    hold_by = ARGV[24] or "", hold_reason = ARGV[25] or "", hold_until = num(ARGV[26]),
    mode = ARGV[27] or "", mode_for = ARGV[28] or "",
  }
  local seen_hgen, seen_mgen = tonumber(ARGV[29]) or 0, tonumber(ARGV[30]) or 0
  local function ends(v)
    return (v.opened or now) + v.cooldown
  end
  local function same_hold(v, w)
    return (v.state == "held") == (w.state == "held") and (v.state ~= "held" or (
      v.hold_by == w.hold_by and v.hold_reason == w.hold_reason
      and math.abs((v.hold_until or 0) - (w.hold_until or 0)) < 0.001))
  end
  -- An operator's write this replica made alone (a hold, a release, a hold run out): its hold
  -- differs from the store's, and no operator wrote through the store since the replica last
  -- saw it (the hold generation stayed). The same for a mode.
  local hold_alone = hgen == seen_hgen and not same_hold(mine, b)
  local mode_alone = mgen == seen_mgen and (mine.mode ~= b.mode or mine.mode_for ~= b.mode_for)
  local graver
  if not exists or gen < seen_gen then
    -- A wiped (or collected) key, or one a failover's new primary has from before this
    -- replica's last transition: versions go on from this replica's, never back.
    ver, gen = math.max(ver, seen_ver), math.max(gen, seen_gen)
    hgen, mgen = math.max(hgen, seen_hgen), math.max(mgen, seen_mgen)
    graver, hold_alone, mode_alone = true, false, mine.mode ~= ""
  elseif hold_alone and mine.state ~= "held" then
    -- Released alone (or its hold ran out here): the store still holds the hold it ended.
    graver = true
  elseif hold_alone then
    -- Held alone: the hold stands over whatever calls did meanwhile (it stops their effect
    -- from now on), on the store's counts.
    graver = false
    b.state, b.probe = "held", ""
    b.hold_by, b.hold_reason, b.hold_until = mine.hold_by, mine.hold_reason, mine.hold_until
  elseif b.state == "held" or mine.state == "held" then
    -- The store's hold stands, and so does its end of this replica's: an operator wrote
    -- through the store meanwhile (or it is the same hold).
    graver = false
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
  local mode, mode_for = b.mode, b.mode_for
  if graver then
    -- A write-back is no transition: the generation stays, so the next returning
    -- replica's verdict is weighed the same way.
    b = mine
  end
  if mode_alone then
    b.mode, b.mode_for = mine.mode, mine.mode_for
  else
    b.mode, b.mode_for = mode, mode_for
  end
  if graver or hold_alone or mode_alone then
    -- An operator's write made alone moves its generation: the next returning replica's
    -- own (made in the same outage) then gives way to it, as to any made through the store.
    if hold_alone then
      hgen = hgen + 1
    end
    if mode_alone then
      mgen = mgen + 1
    end
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
    "cause", b.cause, "probe", b.probe, "pd", b.probe_deadline, "origin", origin, "at", now,
    "hby", b.hold_by, "hwhy", b.hold_reason, "hu", b.hold_until or "", "mode", b.mode,
    "mfor", b.mode_for, "hgen", hgen, "mgen", mgen)
  redis.call("PEXPIRE", key, ttl_ms)
end

answer.name, answer.ver, answer.gen, answer.origin = name, ver, gen, origin
answer.hgen, answer.mgen = hgen, mgen
answer.s = {
  state = b.state, count = b.count, lf = b.last_failure or cjson.null, detail = b.detail,
  opened = b.opened or cjson.null, cooldown = b.cooldown, fp = b.failed_probes, paged = b.paged,
  cause = b.cause, probe = b.probe, pd = b.probe_deadline,
  hby = b.hold_by, hwhy = b.hold_reason, hu = b.hold_until or cjson.null, mode = b.mode,
  mfor = b.mode_for,
}
answer.tr = transitions
local encoded = cjson.encode(answer)
if changed then
  -- A channel with a hash tag is a cluster's shard channel, in this key's slot.
  redis.call(string.find(channel, "{", 1, true) and "SPUBLISH" or "PUBLISH", channel, encoded)
end
return encoded
