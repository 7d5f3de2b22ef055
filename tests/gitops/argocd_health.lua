-- Runs the Argo CD health check in the file arg[1] on objects, as Argo CD does: the object as a
-- Lua table in the global `obj`, the check's chunk run, its `hs.status` and `hs.message` read.
-- Reads a Lua chunk on stdin that returns the list of objects; prints one line per object:
-- status, a tab, the message (its newlines as spaces).
local check = assert(loadfile(arg[1]))
local objects = assert(loadstring(io.read("*a"), "objects"))()
for _, object in ipairs(objects) do
  obj = object
  local hs = check()
  local message = string.gsub(tostring(hs.message or ""), "\n", " ")
  io.write(tostring(hs.status), "\t", message, "\n")
end
