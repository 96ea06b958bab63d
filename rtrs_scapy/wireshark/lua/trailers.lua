-- trailers.lua: the trailer checks of a request.  docs/PROTOCOL.md#request-trailers

-- READ: the trailer sits after the user header, with sg_cnt 1 or 0 descriptors, and
-- ends the message of len bytes; mtvb holds its bytes from base on (the trailer and its
-- descriptors must be among them, the user header need not).
local function classify_read(mtvb, len, base)
  local elem = LIST.rdma_read.element
  for _, n in ipairs({ 1, 0 }) do
    local size = SIZE.rdma_read + SIZE[elem] * n
    local usr_len, off = len - size, len - size - base
    if usr_len >= 0 and off >= 0 then
      local v = READ.rdma_read(mtvb, off)
      if v and v.type == C.RTRS_MSG_READ and v.usr_len == usr_len and v[LIST.rdma_read.count] == n then
        local data_len = 0
        if n == 1 then data_len = v.desc[1].len end
        return { trailer = "rdma_read", trailer_off = off, usr_off = off - usr_len, usr_len = usr_len,
                 chunk_off = data_len + usr_len, desc = v.desc[1] }
      end
    end
  end
  return nil
end

-- WRITE: data | user header | trailer, the trailer ends the message of len bytes; mtvb
-- holds them from base on.  usr_len fits the message, or, of a partial message (its
-- length unknown), stays below the largest header (docs/PROTOCOL.md#request-trailers);
-- the user header may start before the bytes kept (usr_off < 0: not decoded).
local function classify_write(mtvb, len, base, partial)
  local off = len - base - SIZE.rdma_write
  if off < 0 then return nil end
  local v = READ.rdma_write(mtvb, off)
  if not v or v.type ~= C.RTRS_MSG_WRITE then return nil end
  if partial then
    if v.usr_len >= C.DEFAULT_MAX_HDR_SIZE then return nil end
  elseif v.usr_len > len - SIZE.rdma_write then
    return nil
  end
  return { trailer = "rdma_write", trailer_off = off, usr_off = off - v.usr_len, usr_len = v.usr_len,
           chunk_off = len - SIZE.rdma_write }
end

local function user_header(mtvb, rec)
  if rec.usr_len < 2 or rec.usr_off < 0 then return end
  local name = RNBD_BY_TYPE[peek_rnbd_type(mtvb, rec.usr_off)]
  if not name then return end
  rec.usr_name = name
  if rec.usr_len >= SIZE[name] then
    rec.usr = READ[name](mtvb, rec.usr_off)
  end
end
