/**
 * The compare-and-set both revisioned records use (deployments, shared pools): one Lua script
 * sets a hash field to its new revision and pushes that revision onto the record's history list,
 * only when neither the current record nor the latest kept revision moved since the writer read
 * them (see deployment-store.ts's header: no WATCH/MULTI on a shared connection). A record may
 * also name a field of another hash that must exist when it is written (a deployment's shared
 * pool), checked in the same script, so a pool deleted meanwhile cannot be joined.
 *
 * KEYS: the hash, the record's history list, the hash the reference must be in (any key of the
 * same slot when there is none). ARGV: field, record JSON, expected current revision (-1 =
 * absent), expected latest revision, history cap, the referenced field ('' = none).
 * Returns 'ok', 'stale' (lost a race: re-read and try again) or 'missing' (the reference is not there).
 */
export const REVISION_COMMIT_SCRIPT = `
local function revisionOf(raw)
  if not raw then return 0 end
  local ok, decoded = pcall(cjson.decode, raw)
  if ok and type(decoded) == 'table' and type(decoded.revision) == 'number' then return decoded.revision end
  return 0
end
local current = redis.call('HGET', KEYS[1], ARGV[1])
local currentRevision = -1
if current then currentRevision = revisionOf(current) end
local latest = math.max(revisionOf(current), revisionOf(redis.call('LINDEX', KEYS[2], 0)))
if currentRevision ~= tonumber(ARGV[3]) or latest ~= tonumber(ARGV[4]) then return 'stale' end
if ARGV[6] ~= '' and redis.call('HEXISTS', KEYS[3], ARGV[6]) == 0 then return 'missing' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[5]) - 1)
return 'ok'
`;
